import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { AGENT_MARKER_ENV, spawnAgent } from '../../src/process/index.ts';
import {
  baseEnv,
  collect,
  describeInModes,
  fixture,
  livePids,
  nextLine,
  outlivesAgent,
  readPids,
  spawnFixture,
  stopAllAgents,
  testSandbox,
} from '../support/processes.ts';

afterEach(stopAllAgents);

describeInModes('spawnAgent: stdout lines', () => {
  it('delivers every line and the exit code of an agent that exits by itself', async () => {
    const agent = await spawnFixture('print-lines.mjs', ['5', '3']);
    expect(await collect(agent.lines())).toEqual(['line 1', 'line 2', 'line 3', 'line 4', 'line 5']);
    expect(await agent.exited).toEqual({ exitCode: 3, signal: null, stopReason: null });
  });

  it('splits on \\n only: U+2028/U+2029 stay inside JSON lines, \\r\\n is stripped, the unterminated last line comes at EOF', async () => {
    const agent = await spawnFixture('unicode-lines.mjs');
    const lines = await collect(agent.lines());
    expect(lines).toEqual([
      JSON.stringify({ text: 'a\u2028b\u2029c' }),
      'crlf line',
      'price: \u20ac5',
      JSON.stringify({ last: true, text: '\u2029' }),
    ]);
    expect(lines[0]).toContain('\u2028'); // raw, not escaped
    expect(JSON.parse(lines[0] ?? '')).toEqual({ text: 'a\u2028b\u2029c' });
  });

  it('still delivers all buffered output when read only after the agent exited', async () => {
    const agent = await spawnFixture('print-lines.mjs', ['2000']);
    await agent.exited;
    const lines = await collect(agent.lines());
    expect(lines).toHaveLength(2000);
    expect(lines.at(-1)).toBe('line 2000');
  });

  it('lets lines() be taken only once', async () => {
    const agent = await spawnFixture('print-lines.mjs', ['1']);
    await collect(agent.lines());
    expect(() => agent.lines()).toThrow(/only once/);
  });

  it('ends the lines once the agent exited even if a descendant keeps stdout open', async () => {
    const agent = await spawnFixture('pi-like.mjs', ['--inherit-stdout', '--exit-after-ms', '50']);
    const lines = agent.lines()[Symbol.asyncIterator]();
    const pids = await readPids(lines, agent);
    expect((await lines.next()).done).toBe(true);
    expect((await agent.exited).exitCode).toBe(0);
    // Not killed by reading: only stop() kills (or, in a bwrap sandbox, the end of the agent's PID namespace).
    expect(await livePids(pids.slice(1))).toEqual(outlivesAgent(agent) ? pids.slice(1) : []);
    await agent.stop();
    expect(await livePids(pids)).toEqual([]);
  });

  it('keeps draining stdout after the consumer stops reading, so the agent can finish', async () => {
    const agent = await spawnFixture('print-lines.mjs', ['100000']);
    for await (const line of agent.lines()) {
      expect(line).toBe('line 1');
      break;
    }
    expect((await agent.exited).exitCode).toBe(0);
  });
});

describeInModes('spawnAgent: stderr', () => {
  it('drains a flood of stderr without blocking the agent and keeps a bounded tail', async () => {
    const agent = await spawnFixture('flood-stderr.mjs', ['32'], { stderrTailBytes: 4096 });
    const lines = await collect(agent.lines());
    expect(lines).toHaveLength(33);
    expect(lines.at(-1)).toBe('done');
    expect((await agent.exited).exitCode).toBe(0);
    const tail = agent.stderrTail();
    expect(Buffer.byteLength(tail)).toBeLessThanOrEqual(4096);
    expect(tail.endsWith('\nstderr-end\n')).toBe(true);
  });

  it('keeps 64 KiB of stderr by default', async () => {
    const agent = await spawnFixture('flood-stderr.mjs', ['2']);
    await collect(agent.lines());
    await agent.exited;
    expect(Buffer.byteLength(agent.stderrTail())).toBe(64 * 1024);
  });
});

describeInModes('spawnAgent: environment and stdin', () => {
  it('passes exactly the given env plus the tree marker', async () => {
    const agent = await spawnFixture('print-env.mjs', [], { env: { ...baseEnv(), ONLY_THIS: 'yes' } });
    const [line] = await collect(agent.lines());
    const env = JSON.parse(line ?? '{}') as Record<string, string>;
    expect(env.ONLY_THIS).toBe('yes');
    expect(env[AGENT_MARKER_ENV]).toBe(agent.marker);
    // A sandbox gives the agent a private HOME and TMPDIR (bubblewrap also sets PWD).
    const sandboxed =
      agent.sandbox === 'none' ? [] : agent.sandbox === 'bwrap' ? ['HOME', 'TMPDIR', 'PWD'] : ['HOME', 'TMPDIR'];
    expect(
      Object.keys(env).filter((key) => !['ONLY_THIS', 'PATH', AGENT_MARKER_ENV, ...sandboxed].includes(key)),
    ).toEqual([]);
  });

  it('uses the marker the caller chose, and refuses an unsafe one', async () => {
    const marker = `sessiond-test-${Date.now()}`;
    const agent = await spawnFixture('print-env.mjs', [], { marker });
    expect(agent.marker).toBe(marker);
    const [line] = await collect(agent.lines());
    expect((JSON.parse(line ?? '{}') as Record<string, string>)[AGENT_MARKER_ENV]).toBe(marker);
    const refused = await spawnAgent({
      command: process.execPath,
      args: [],
      env: {},
      marker: 'x=y\0z',
      ...testSandbox(),
    });
    expect(refused).toMatchObject({ ok: false, code: 'EINVAL' });
  });

  it('gives each agent its own marker', async () => {
    const [a, b] = await Promise.all([spawnFixture('print-lines.mjs', ['1']), spawnFixture('print-lines.mjs', ['1'])]);
    expect(a.marker).not.toBe(b.marker);
  });

  it('puts stdin at EOF by default', async () => {
    const agent = await spawnFixture('stdin-probe.mjs');
    const lines = agent.lines()[Symbol.asyncIterator]();
    expect(await nextLine(lines)).toBe('ready');
    expect(await nextLine(lines)).toBe('stdin-eof');
    expect(agent.stdin).toBeNull();
  });

  it("keeps stdin open in 'pipe' mode, and stop() types Ctrl-C there", async () => {
    const agent = await spawnFixture('stdin-probe.mjs', [], { stdinMode: 'pipe' });
    const lines = agent.lines()[Symbol.asyncIterator]();
    expect(await nextLine(lines)).toBe('ready');
    const stopped = agent.stop();
    expect(await nextLine(lines)).toBe('ctrl-c');
    await stopped;
    expect(await agent.exited).toEqual({ exitCode: 0, signal: null, stopReason: 'requested' });
  });
});

describeInModes('spawnAgent: startup failures', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'sessiond-spawn-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reports a missing command by name, as a value', async () => {
    const result = await spawnAgent({
      command: 'sessiond-no-such-agent',
      args: ['-p'],
      env: baseEnv(),
      ...testSandbox(),
    });
    expect(result).toMatchObject({ ok: false, code: 'ENOENT' });
    expect(!result.ok && result.error).toContain('"sessiond-no-such-agent"');
  });

  it('reports a missing absolute path by name', async () => {
    const command = path.join(dir, 'missing-agent');
    const result = await spawnAgent({ command, args: [], env: {} });
    expect(result).toMatchObject({ ok: false, code: 'ENOENT' });
    expect(!result.ok && result.error).toContain(command);
  });

  it('reports a file that is not executable', async () => {
    const command = path.join(dir, 'not-executable');
    await writeFile(command, '#!/bin/sh\necho hi\n');
    await chmod(command, 0o644);
    const result = await spawnAgent({ command, args: [], env: {} });
    expect(result).toMatchObject({ ok: false, code: 'EACCES' });
    expect(!result.ok && result.error).toContain(command);
  });

  it('reports a missing cwd, naming the command and the cwd', async () => {
    const cwd = path.join(dir, 'no-such-dir');
    const result = await spawnAgent({
      command: process.execPath,
      args: [fixture('print-lines.mjs')],
      cwd,
      env: {},
      ...testSandbox(),
    });
    expect(result).toMatchObject({ ok: false, code: 'ENOENT' });
    expect(!result.ok && result.error).toContain(cwd);
    expect(!result.ok && result.error).toContain(process.execPath);
  });

  it('runs in the given cwd', async () => {
    const result = await spawnAgent({ command: 'pwd', args: [], cwd: dir, env: baseEnv(), ...testSandbox() });
    if (!result.ok) throw new Error(result.error);
    expect(await collect(result.agent.lines())).toEqual([dir]);
  });

  it('passes arguments verbatim, without a shell', async () => {
    const result = await spawnAgent({
      command: 'printf',
      args: ['%s\\n', '$HOME', '; echo hacked', '*'],
      env: baseEnv(),
      ...testSandbox(),
    });
    if (!result.ok) throw new Error(result.error);
    expect(await collect(result.agent.lines())).toEqual(['$HOME', '; echo hacked', '*']);
  });
});
