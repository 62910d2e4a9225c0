import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { liveSleeps } from '../../support/ps.ts';

const PROCESS_INDEX = fileURLToPath(new URL('../../../src/process/index.ts', import.meta.url));

/** A stand-in worker: starts a sandboxed agent whose tool runs `sleep 4545` in the background, prints `ready`, waits. */
const WORKER = `
import { spawnAgent } from ${JSON.stringify(PROCESS_INDEX)};
const r = await spawnAgent({ command: 'bash', args: ['-c', 'sleep 4545 & setsid sleep 4546 & echo up; wait'], env: { PATH: process.env.PATH }, sandbox: { mode: 'bwrap' } });
if (!r.ok) { console.log('failed ' + r.error); process.exit(1); }
for await (const line of r.agent.lines()) { console.log(line === 'up' ? 'ready' : line); }
`;

const until = async (probe: () => boolean, ms: number): Promise<void> => {
  const deadline = Date.now() + ms;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
};

describe('kill -9 of the worker', () => {
  it('leaves no process of its bwrap-sandboxed agents (the sandbox dies with its parent)', async () => {
    const worker = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', WORKER], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    worker.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    await until(() => out.includes('ready') || out.includes('failed'), 30_000);
    expect(out).toContain('ready');
    expect(liveSleeps([4545, 4546])).toHaveLength(2);

    worker.kill('SIGKILL');

    await until(() => liveSleeps([4545, 4546]).length === 0, 10_000);
    expect(liveSleeps([4545, 4546])).toEqual([]);
  });
});
