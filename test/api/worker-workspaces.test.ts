import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  ConfigError,
  createClient,
  createWorker,
  defineAgent,
  type CliMessage,
  type Client,
  type Worker,
} from '../../src/index.ts';
import { collect } from '../support/processes.ts';
import { startRedis, uniquePrefix, type RedisServer } from '../support/redis.ts';
import { tempDir, workspacesIn } from '../workspace/support.ts';

/**
 * A library worker with per-session workspaces (`createWorker({ workspaces })`), a real redis-server
 * and real git: a session whose caller names no cwd works in a directory of its own, what its turn
 * wrote is recorded (the client's `diff` shows it), and another session does not see it.
 */

// Writes `name` in its cwd as a tool would: the call, the file, the result.
const writer = defineAgent({
  name: 'writer',
  options: z.object({}),
  async *run({ prompt, options }) {
    const [name = 'out.txt', text = ''] = prompt.split(' ');
    yield { type: 'tool.call', content: { toolCallId: 'w1', name: 'write', arguments: { path: name } } };
    writeFileSync(join(options.cwd ?? '.', name), `${text}\n`);
    yield { type: 'tool.completed', content: { toolCallId: 'w1', name: 'write', result: 'written' } };
    yield { type: 'terminal.completed', content: { stopReason: 'end' } };
  },
});

// Plain JavaScript can yield anything: a message the contract does not know.
const sloppy = defineAgent({
  name: 'sloppy',
  options: z.object({}),
  async *run() {
    yield { type: 'assistant', content: { text: 'fine' } };
    yield { type: 'tool.result', content: { output: 'not a type sessiond has' } } as unknown as CliMessage;
    yield { type: 'terminal.completed', content: { stopReason: 'end' } };
  },
});

let redis: RedisServer;
let dir: { dir: string; cleanup: () => void };
let worker: Worker;
let client: Client;

beforeAll(async () => {
  redis = await startRedis();
  dir = tempDir();
  const prefix = uniquePrefix('ws-api');
  const workspaces = workspacesIn(dir.dir);
  worker = createWorker({ redis: redis.url, prefix, agents: [writer, sloppy], workspaces, egress: false });
  await worker.start();
  client = createClient({ redis: redis.url, prefix, agents: [writer, sloppy], workspaces });
});

afterAll(async () => {
  await client?.close();
  await worker?.close();
  await redis?.stop();
  dir?.cleanup();
});

async function completedTurn(prompt: string, sessionId?: string): Promise<string> {
  const { sessionId: id } = await client.sessions.enqueue({
    ...(sessionId === undefined ? { options: { agent: 'writer' } } : { sessionId }),
    prompt,
  });
  for await (const message of client.session(id).watch({ follow: true })) {
    if (message.type.startsWith('terminal.')) {
      expect(message.type).toBe('terminal.completed');
      break;
    }
  }
  return id;
}

describe('a library worker', () => {
  it("gives a session without a cwd files of its own, recorded each turn, apart from another session's", async () => {
    const first = await completedTurn('notes.txt hello');
    const second = await completedTurn('other.txt world');
    const root = join(dir.dir, 'root');
    expect(readFileSync(join(root, first, 'notes.txt'), 'utf8')).toBe('hello\n');
    expect(existsSync(join(root, first, 'other.txt'))).toBe(false);
    expect(existsSync(join(root, second, 'notes.txt'))).toBe(false);
    const diff = await client.session(first).diff();
    expect(JSON.stringify(diff)).toContain('notes.txt');
    expect(JSON.stringify(diff)).toContain('+hello');
  });

  it('refuses an unusable workspaces option with a ConfigError naming the field, before connecting', () => {
    const bad = { ...workspacesIn(dir.dir), gitDir: join(dir.dir, 'root', 'git') };
    expect(() => createWorker({ redis: 'redis://127.0.0.1:1', workspaces: bad })).toThrow(ConfigError);
    expect(() => createWorker({ redis: 'redis://127.0.0.1:1', workspaces: bad })).toThrow(/^workspaces\.gitDir: /);
    expect(() => createClient({ redis: 'redis://127.0.0.1:1', workspaces: { ...bad, store: 'relative' } })).toThrow(
      /workspaces\.(gitDir|store): /,
    );
  });

  it('ends the attempt invalid_output at a message the contract does not know, naming it, and stores nothing of it', async () => {
    const { sessionId } = await client.sessions.enqueue({
      prompt: 'x',
      options: { agent: 'sloppy' },
      retryPolicy: { maxAttempts: 1 },
    });
    const log = await collect(client.session(sessionId).watch());
    expect(log.map((m) => m.type)).toEqual(['assistant', 'terminal.failed']);
    expect(log.at(-1)?.content).toMatchObject({
      category: 'invalid_output',
      text: expect.stringMatching(/^agent "sloppy" yielded an invalid message #2 \(tool\.result\) at type: /),
    });
    expect((await client.session(sessionId).inspect())?.state).toBe('failed');
  });
});

describe('a library worker by default (no workspaces option), as the CLI worker', () => {
  // The default lives under $SESSIOND_STATE_DIR, read when the worker and the client are created.
  let state: { dir: string; cleanup: () => void };
  let saved: { state: string | undefined; path: string | undefined };
  beforeAll(() => {
    state = tempDir('sessiond-ws-default-');
    saved = { state: process.env.SESSIOND_STATE_DIR, path: process.env.PATH };
    process.env.SESSIOND_STATE_DIR = state.dir;
  });
  afterAll(() => {
    if (saved.state === undefined) delete process.env.SESSIOND_STATE_DIR;
    else process.env.SESSIOND_STATE_DIR = saved.state;
    process.env.PATH = saved.path;
    state.cleanup();
  });

  async function run(prefix: string, workspaces: false | undefined, cwd: string): Promise<string> {
    const opts = { redis: redis.url, prefix, agents: [writer], ...(workspaces === false ? { workspaces } : {}) };
    const own = createWorker({ ...opts, egress: false, workspace: cwd });
    await own.start();
    const caller = createClient({ ...opts, workspace: cwd });
    try {
      const { sessionId } = await caller.sessions.enqueue({ prompt: 'default.txt on', options: { agent: 'writer' } });
      for await (const message of caller.session(sessionId).watch({ follow: true })) {
        if (!message.type.startsWith('terminal.')) continue;
        expect(message.type).toBe('terminal.completed');
        break;
      }
      if (workspaces === undefined) expect(JSON.stringify(await caller.session(sessionId).diff())).toContain('+on');
      return sessionId;
    } finally {
      await caller.close();
      await own.close();
    }
  }

  it('gives a session without a cwd its own workspace under the state dir; `workspaces: false` runs it in `workspace`', async () => {
    const cwd = join(state.dir, 'cwd');
    mkdirSync(cwd);
    const on = await run(uniquePrefix('ws-default'), undefined, cwd);
    expect(readFileSync(join(state.dir, 'workspaces', on, 'default.txt'), 'utf8')).toBe('on\n');
    expect(existsSync(join(state.dir, 'workspace-store.git', 'HEAD'))).toBe(true);
    expect(existsSync(join(cwd, 'default.txt'))).toBe(false);
    const off = await run(uniquePrefix('ws-off'), false, cwd);
    expect(readFileSync(join(cwd, 'default.txt'), 'utf8')).toBe('on\n');
    expect(existsSync(join(state.dir, 'workspaces', off))).toBe(false);
  });

  it('without git on PATH: start() rejects with a ConfigError naming both fixes; `workspaces: false` starts', async () => {
    const empty = join(state.dir, 'no-git');
    mkdirSync(empty);
    process.env.PATH = empty;
    const prefix = uniquePrefix('ws-nogit');
    const refused = createWorker({ redis: redis.url, prefix, agents: [writer], egress: false });
    try {
      const error = await refused.start().then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toBe(
        `workspaces.enabled: per-session workspaces are on (the default) and need git on this host, which cannot run: git was not found on PATH (${empty}). Install git, or turn workspaces off: SESSIOND_WORKSPACES_ENABLED=false (config workspaces.enabled: false; a library worker: \`workspaces: false\`)`,
      );
    } finally {
      await refused.close();
    }
    const off = createWorker({ redis: redis.url, prefix, agents: [writer], egress: false, workspaces: false });
    try {
      await off.start();
    } finally {
      await off.close();
      process.env.PATH = saved.path;
    }
  });
});
