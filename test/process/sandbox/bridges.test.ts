import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnAgent } from '../../../src/process/index.ts';
import { collect } from '../../support/processes.ts';

const FETCH =
  'fetch(process.env.UPSTREAM).then((r) => r.text()).then((t) => console.log("got " + t), (e) => { console.log("refused " + (e.cause?.code ?? e.message)); })';

let dir: string;
let server: Server;
let socket: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'bridges-'));
  socket = join(dir, 'upstream.sock');
  server = createServer((req, res) => res.end(`upstream saw ${req.method ?? ''} ${req.url ?? ''}`));
  await new Promise<void>((resolve) => server.listen(socket, resolve));
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

describe.each(['bwrap', 'landlock', 'none'] as const)('bridges in %s mode', (mode) => {
  it('the agent reaches a host Unix socket at the URL handed to finalize, before its env is final', async () => {
    const handed: Array<Record<string, string>> = [];
    const result = await spawnAgent({
      command: process.execPath,
      args: ['-e', FETCH],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      sandbox: { mode },
      bridges: [{ name: 'egress', socket }],
      finalize: (urls) => {
        handed.push({ ...urls });
        return { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', UPSTREAM: `${urls.egress ?? ''}/v1/models` } };
      },
    });
    if (!result.ok) throw new Error(result.error);
    expect(result.agent.sandbox).toBe(mode);
    expect(handed).toHaveLength(1);
    expect(handed[0]?.egress).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(await collect(result.agent.lines())).toEqual(['got upstream saw GET /v1/models']);
    await result.agent.stop();
  });

  it('two bridges of one name refuse the attempt with a message naming it', async () => {
    const result = await spawnAgent({
      command: process.execPath,
      args: ['-e', ''],
      env: {},
      sandbox: { mode },
      bridges: [
        { name: 'egress', socket },
        { name: 'egress', socket },
      ],
    });
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error).toContain('bridge "egress" is named twice');
  });
});
