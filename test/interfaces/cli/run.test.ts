import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonLines, runCli, sessiond } from '../../support/cli.ts';
import { startFakeModelServer, type FakeModelServer } from '../../support/fake-model-server.ts';
import { livePidsMatching } from '../../support/processes.ts';
import { createPiEnv, type PiEnv } from '../../support/pi-env.ts';

let server: FakeModelServer;
let env: PiEnv;
let stateDir: string;

beforeAll(async () => {
  server = await startFakeModelServer();
  env = createPiEnv({ serverUrl: server.url });
  stateDir = mkdtempSync(join(tmpdir(), 'sessiond-state-'));
});

afterAll(async () => {
  await server.close();
  env.cleanup();
  rmSync(stateDir, { recursive: true, force: true });
});

const cliEnv = () => ({ ...env.env, SESSIOND_STATE_DIR: stateDir, PATH: process.env.PATH ?? '' });
const runArgs = (model: string) => [
  'run',
  '--cwd',
  env.cwd,
  '--agent-dir',
  env.agentDir,
  '--session-dir',
  env.sessionDir,
  '--provider',
  'fake',
  '--model',
  model,
];

describe('sessiond run', () => {
  it('prints the assistant text live and exits 0 on terminal.completed', async () => {
    const result = await runCli([...runArgs('text'), 'Say hello'], { env: cliEnv() });
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toBe('Hello from the fake LLM.\n');
    expect(result.stderr).toMatch(/session: [0-9a-f-]{36}/);
  });

  it('--json prints the normalized messages as JSON lines', async () => {
    const result = await runCli([...runArgs('tool'), '--json', 'Run echo hi'], { env: cliEnv() });
    expect(result.exitCode).toBe(0);
    const types = jsonLines(result.stdout).map((m) => m.type);
    expect(types[0]).toBe('session.started');
    expect(types).toContain('tool.call');
    expect(types.at(-1)).toBe('terminal.completed');
  });

  it('exits 1 on terminal.failed with the category and reason on stderr', async () => {
    const result = await runCli([...runArgs('http401'), 'Say hello'], { env: cliEnv() });
    expect(result.exitCode).toBe(1);
    expect(result.stderr).toContain('failed (auth)');
    expect(result.stderr).toContain('401');
  });

  it('a bad argument exits 2 naming it', async () => {
    const result = await runCli([...runArgs('text'), '--thinking', 'extreme', 'Say hello'], { env: cliEnv() });
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toContain('--thinking');
    const timeout = await runCli([...runArgs('text'), '--idle-timeout', 'soon', 'Say hello'], { env: cliEnv() });
    expect(timeout.exitCode).toBe(2);
    expect(timeout.stderr).toContain('--idle-timeout');
  });

  it("Ctrl+C during a long tool exits 130 after the agent's whole tree is gone", async () => {
    const child = sessiond([...runArgs('long-tool-grandchild'), '--json', 'Run a long command'], { env: cliEnv() });
    let buffered = '';
    await new Promise<void>((resolve, reject) => {
      child.stdout?.on('data', (chunk: Buffer) => {
        buffered += chunk.toString();
        if (buffered.includes('"tool.update"')) resolve();
      });
      child.on('exit', () => reject(new Error(`exited early: ${buffered}`)));
    });
    await new Promise((r) => setTimeout(r, 300));
    child.kill('SIGINT');
    const result = await child;
    expect(result.exitCode).toBe(130);
    expect(String(result.stderr)).toContain('cancelled');
    expect(livePidsMatching(/sleep 100[12]/)).toEqual([]);
  });
});
