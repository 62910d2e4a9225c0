import { spawn } from 'node:child_process';
import net from 'node:net';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { REPO_ROOT } from '../support/pi-env.ts';
import { tempDir } from './support.ts';

let tmp: { dir: string; cleanup: () => void };
beforeEach(() => {
  tmp = tempDir();
});
afterEach(() => tmp.cleanup());

/**
 * A worker stops gracefully on its first SIGTERM (`process.once`, worker-action.ts). A library that
 * watches signals while sessiond's git runs must not take that over: execa's exit cleanup
 * (signal-exit) re-raised the signal once it saw no other listener, which the process's own
 * handler had just stopped being, and the worker died by SIGTERM in the middle of its shutdown.
 */
it("a SIGTERM while sessiond's git runs reaches the process's handler alone", async () => {
  // A git server that accepts and never answers: the git call runs until the test lets it go.
  const sockets = new Set<net.Socket>();
  let connected: () => void = () => undefined;
  const running = new Promise<void>((resolve) => (connected = resolve));
  const server = net.createServer((socket) => {
    sockets.add(socket);
    connected();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  const script = [
    `import { Git } from ${JSON.stringify(join(REPO_ROOT, 'src/workspace/git.ts'))};`,
    `process.once('SIGTERM', () => { process.stdout.write('handled\\n'); setTimeout(() => process.exit(0), 300); });`,
    `void new Git(${JSON.stringify(tmp.dir)}).try(['ls-remote', 'git://127.0.0.1:${port}/store.git']);`,
    `setInterval(() => undefined, 1000);`,
  ].join('\n');
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  try {
    await running;
    child.kill('SIGTERM');
    expect(await exited).toEqual({ code: 0, signal: null });
    expect(out).toContain('handled');
  } finally {
    child.kill('SIGKILL');
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  }
});
