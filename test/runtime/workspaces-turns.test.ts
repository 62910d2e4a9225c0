import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { clientOver } from '../../src/api/bind.ts';
import type { Client } from '../../src/api/client.ts';
import { ConflictError, InputError, NotFoundError, QuotaError } from '../../src/errors.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import { internals } from '../../src/runtime/internals.ts';
import type { WorkspaceConfig } from '../../src/workspace/index.ts';
import { runCli } from '../support/cli.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createApp } from '../../src/interfaces/http/app.ts';
import { pino } from 'pino';
import { runModel } from '../support/workspace-model.ts';
import { piHostOptions, TEST_POLICY, turnEnded, until, useRuntimeSuite, type Harness } from '../support/runtime.ts';
import { workspacesIn } from '../workspace/support.ts';

/**
 * Undo, fork and diff of a workspace session's turns (docs/workspaces.md), through the library
 * client, with real pi against the fake model, real git and real Redis, one in-process worker:
 * the files and pi's conversation go back a turn (and the next turn builds on them), a fork starts
 * from a turn's files and conversation while its source goes on, a turn's diff shows its change.
 */

const MODEL = 'ws-turns';

let suite: { server: import('../support/fake-model-server.ts').FakeModelServer };
let h: Harness;
let config: WorkspaceConfig;
let client: Client;
let cwdDir: string;
let cliEnv: Record<string, string>;

const options = () => ({ provider: 'fake', model: MODEL });

/** The model's requests for prompts holding `marker`. */
function requestsMentioning(marker: string) {
  return suite.server.requestsFor(MODEL).filter((r) => JSON.stringify(r.body.messages ?? []).includes(marker));
}

/** Once no worker holds the session and no activation waits (undo is refused before). */
async function settled(sessionId: string): Promise<void> {
  const keys = internals(h.runtime).keys;
  const redis = h.connect('t');
  await until(
    async () =>
      (await redis.exists(keys.session(sessionId, 'lease'), keys.session(sessionId, 'active'))) === 0 ? true : null,
    15_000,
    'the session to settle',
  );
}

async function turn(sessionId: string | undefined, n: number, prompt: string): Promise<string> {
  const { sessionId: id } = await h.runtime.enqueue({
    ...(sessionId === undefined ? { options: options() } : { sessionId }),
    prompt,
  });
  expect((await turnEnded(h.runtime, id, n)).state).toBe('completed');
  return id;
}

const file = (sessionId: string, name: string) => join(config.root, sessionId, name);
const read = (sessionId: string, name: string) => readFileSync(file(sessionId, name), 'utf8');

describe('undo, fork and diff of a workspace session’s turns', () => {
  useRuntimeSuite(
    'workspace-turns',
    {
      scripts: { [MODEL]: runModel() },
      cleanup: async () => {
        await client?.close();
      },
    },
    async (s) => {
      suite = s;
      ({ h } = s);
      const dir = s.tempDir('ws-turns');
      cwdDir = s.tempDir('ws-turns-cwd');
      config = workspacesIn(dir);
      client = clientOver(
        new Runtime({ connect: h.connect, prefix: h.prefix, policy: TEST_POLICY, workspaces: config }),
      );
      // The CLI as an operator on another host runs it: its own git data (under its state dir), the same store.
      cliEnv = {
        ...s.cliEnv(),
        SESSIOND_STATE_DIR: s.tempDir('ws-turns-cli'),
        SESSIOND_WORKSPACES_ENABLED: '1',
        SESSIOND_WORKSPACES: config.root,
        SESSIOND_WORKSPACE_STORE: config.store,
      };
      await h.startWorker({ workspaces: config, agentOptions: { pi: piHostOptions(s.env, h.stateDir) } });
    },
  );

  it('undo after two turns: files and pi’s conversation are turn 1’s, and the next turn builds on them', async () => {
    const id = await turn(undefined, 1, 'RUN: echo one > a.txt');
    await turn(id, 2, 'RUN: echo two > b.txt; echo more >> a.txt');
    expect(read(id, 'a.txt')).toBe('one\nmore\n');
    await settled(id);
    // A log that is full takes no undo message: refused as a prompt is, nothing undone.
    const stored = await client.session(id).lastSeq();
    for (const [limits, limit] of [
      [{ maxLogMessages: stored }, 'maxLogMessages'],
      [{ maxLogBytes: 10 }, 'maxLogBytes'],
    ] as const) {
      const full = clientOver(
        new Runtime({ connect: h.connect, prefix: h.prefix, policy: TEST_POLICY, workspaces: config, limits }),
      );
      const error = await full
        .session(id)
        .undo()
        .catch((e: unknown) => e);
      await full.close();
      expect(error).toBeInstanceOf(QuotaError);
      expect(error).toMatchObject({
        limit,
        message: expect.stringMatching(/message log is full .* nothing was undone$/),
      });
    }
    expect(await client.session(id).lastSeq()).toBe(stored);
    const undone = await client.session(id).undo();
    expect(undone).toMatchObject({ sessionId: id, undone: 2, to: 1, cancelled: false });
    const last = (await client.session(id).messages()).at(-1);
    expect(last?.type).toBe('workspace.undone');
    expect(last?.content).toMatchObject({ turn: 2, to: 1 });

    await turn(id, 3, 'RUN: cat a.txt > c.txt # after-undo');
    expect(read(id, 'a.txt')).toBe('one\n');
    expect(read(id, 'c.txt')).toBe('one\n');
    expect(existsSync(file(id, 'b.txt'))).toBe(false);
    const next = requestsMentioning('after-undo');
    expect(next.length).toBeGreaterThan(0);
    for (const r of next) {
      const json = JSON.stringify(r.body.messages);
      expect(json).toContain('echo one > a.txt');
      expect(json).not.toContain('echo two');
    }

    // Each turn's diff: turn 3 made c.txt; turn 1 (from the session's start) made a.txt.
    await settled(id);
    const third = await client.session(id).diff();
    expect(third).toMatchObject({ turn: 3, from: 1 });
    expect(third.diff).toContain('+++ b/c.txt');
    expect(third.diff).not.toContain('b.txt\n');
    const first = await client.session(id).diff({ turn: 1 });
    expect(first.from).toBe(0);
    expect(first.diff).toContain('+one');
    expect((await client.session(id).diff({ turn: 1, stat: true })).diff).toMatch(/a\.txt \| 1 \+/);
    // Turn 2 was undone: no point of it any more.
    await expect(client.session(id).diff({ turn: 2 })).rejects.toThrow(/no recorded turn 2 \(recorded: 1, 3\)/);

    // Undo again goes back to turn 1; turn 1 itself is the first: refused.
    expect(await client.session(id).undo()).toMatchObject({ undone: 3, to: 1 });
    const refused = await client
      .session(id)
      .undo()
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ConflictError);
    expect((refused as Error).message).toMatch(/turn 1 is the first turn/);
  }, 120_000);

  it('undo is refused while a turn runs; with force the turn is cancelled first, then the last completed turn undone', async () => {
    const id = await turn(undefined, 1, 'RUN: echo one > a.txt');
    await turn(id, 2, 'RUN: echo two > b.txt');
    await h.runtime.enqueue({ sessionId: id, prompt: 'RUN: echo three > c.txt; sleep 30 # long-turn' });
    await until(async () => existsSync(file(id, 'c.txt')), 30_000, 'the long turn’s tool to start');
    const refused = await client
      .session(id)
      .undo()
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ConflictError);
    expect((refused as Error).message).toMatch(/is running a turn/);
    expect(existsSync(file(id, 'b.txt'))).toBe(true);
    // A recorded turn's diff meanwhile: the caller's own git data, not the holder's.
    expect((await client.session(id).diff()).diff).toContain('+++ b/b.txt');

    const forced = await client.session(id).undo({ force: true });
    expect(forced).toMatchObject({ undone: 2, to: 1, cancelled: true });
    expect((await h.runtime.getSession(id))?.state).toBe('cancelled');
    await turn(id, 4, 'RUN: ls > list.txt # after-force');
    const list = read(id, 'list.txt').split('\n');
    expect(list).toContain('a.txt');
    expect(list).not.toContain('b.txt');
    expect(list).not.toContain('c.txt');
    expect(requestsMentioning('after-force').length).toBeGreaterThan(0);
    for (const r of requestsMentioning('after-force')) {
      const json = JSON.stringify(r.body.messages);
      expect(json).not.toContain('echo two');
      expect(json).not.toContain('long-turn');
    }
  }, 120_000);

  it('fork at turn 1: the new session has turn 1’s files and conversation, the source is untouched, both go on', async () => {
    const id = await turn(undefined, 1, 'RUN: echo one > a.txt');
    await turn(id, 2, 'RUN: echo two > b.txt');
    await settled(id);
    const copy = `${id}-fork`;
    const forked = await client.session(id).fork({ turn: 1, as: copy });
    expect(forked).toMatchObject({ sessionId: copy, turn: 1, conversation: 'forked' });
    const copied = await client.session(copy).messages();
    expect(copied.every((m) => m.turn <= 1)).toBe(true);
    expect(copied.some((m) => m.type === 'terminal.completed')).toBe(true);

    const promptsBefore = (await h.runtime.getSession(copy))?.context?.turnIndex ?? 0;
    await h.runtime.enqueue({ sessionId: copy, prompt: 'RUN: ls > list.txt # fork-next' });
    expect((await turnEnded(h.runtime, copy, promptsBefore + 1)).state).toBe('completed');
    const list = read(copy, 'list.txt').split('\n');
    expect(list).toContain('a.txt');
    expect(list).not.toContain('b.txt');
    const forkRequests = requestsMentioning('fork-next');
    expect(forkRequests.length).toBeGreaterThan(0);
    for (const r of forkRequests) {
      const json = JSON.stringify(r.body.messages);
      expect(json).toContain('echo one > a.txt');
      expect(json).not.toContain('echo two');
    }

    // The source goes on from its own turn 2, unchanged by the fork.
    await turn(id, 3, 'RUN: ls > list.txt # source-next');
    const sourceList = read(id, 'list.txt').split('\n');
    expect(sourceList).toContain('b.txt');
    expect(requestsMentioning('source-next').length).toBeGreaterThan(0);
    for (const r of requestsMentioning('source-next')) expect(JSON.stringify(r.body.messages)).toContain('echo two');
    // The fork's conversation is its own: the source's next turn did not reach it.
    expect(requestsMentioning('fork-next').every((r) => !JSON.stringify(r.body.messages).includes('source-next'))).toBe(
      true,
    );
  }, 120_000);

  it('errors: no workspace, an unknown turn or session, a fork onto an existing id', async () => {
    const { sessionId: plain } = await h.runtime.enqueue({ prompt: 'Hello', options: { ...options(), cwd: cwdDir } });
    expect((await turnEnded(h.runtime, plain, 1)).state).toBe('completed');
    await settled(plain);
    for (const call of [
      () => client.session(plain).undo(),
      () => client.session(plain).diff(),
      () => client.session(plain).fork({ as: `${plain}-x` }),
    ]) {
      const error = await call().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConflictError);
      expect((error as Error).message).toMatch(/has no workspace/);
    }
    await expect(client.session('no-such-session').undo()).rejects.toBeInstanceOf(NotFoundError);

    const id = await turn(undefined, 1, 'RUN: echo one > a.txt');
    await settled(id);
    const unknown = await client
      .session(id)
      .diff({ turn: 7 })
      .catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(InputError);
    expect((unknown as InputError).issues[0]?.field).toBe('turn');
    await expect(client.session(id).fork({ turn: 0, as: 'x-new' })).rejects.toBeInstanceOf(InputError);
    await expect(client.session(id).fork({ as: plain })).rejects.toThrow(/already exists/);
    // Refused forks wrote nothing: no session, no snapshots of it.
    expect(await h.runtime.getSession('x-new')).toBeNull();

    // An agent without stateMark / stateAtMark (every agent but pi): undo and fork refuse, naming it. The
    // session is made one of codex here by its record alone (what undo reads), after a second turn of pi.
    await turn(id, 2, 'RUN: echo two > b.txt');
    await settled(id);
    await h.connect('t').hset(internals(h.runtime).keys.session(id, 'meta'), 'agent', 'codex');
    for (const call of [() => client.session(id).undo(), () => client.session(id).fork({ as: `${id}-codex` })]) {
      const error = await call().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConflictError);
      expect((error as Error).message).toBe(
        'agent "codex" cannot take its conversation back to an earlier turn (it has no stateAtMark): undo and fork need it',
      );
    }
    // Diff needs no agent state.
    expect((await client.session(id).diff()).diff).toContain('+++ b/b.txt');
  }, 90_000);

  it('the CLI: diff (and --stat), fork --turn --as, undo; exit 1 for a refusal, 2 for a bad turn', async () => {
    const id = await turn(undefined, 1, 'RUN: echo one > a.txt');
    await turn(id, 2, 'RUN: echo two > b.txt');
    await settled(id);
    const diff = await runCli(['diff', id], { env: cliEnv });
    expect(diff.stderr).toBe('');
    expect(diff.exitCode).toBe(0);
    expect(diff.stdout).toContain('+++ b/b.txt');
    expect(diff.stdout).not.toContain('a.txt');
    const stat = await runCli(['diff', id, '--turn', '1', '--stat', '--json'], { env: cliEnv });
    expect(JSON.parse(stat.stdout)).toMatchObject({ sessionId: id, turn: 1, from: 0 });
    expect((JSON.parse(stat.stdout) as { diff: string }).diff).toMatch(/a\.txt \| 1 \+/);
    expect((await runCli(['diff', id, '--turn', 'x'], { env: cliEnv })).exitCode).toBe(2);
    const unknown = await runCli(['diff', id, '--turn', '9'], { env: cliEnv });
    expect(unknown.exitCode).toBe(2);
    expect(unknown.stderr).toContain('turn: ');

    const copy = `${id}-cli`;
    const fork = await runCli(['fork', id, '--turn', '1', '--as', copy, '--json'], { env: cliEnv });
    expect(fork.stderr).toBe('');
    expect(JSON.parse(fork.stdout)).toMatchObject({ sessionId: copy, turn: 1 });
    expect((await client.session(copy).inspect())?.sessionId).toBe(copy);

    const undo = await runCli(['undo', id], { env: cliEnv });
    expect(undo.stdout).toBe(`turn 2 of ${id} undone: its files and conversation are turn 1's\n`);
    const again = await runCli(['undo', id], { env: cliEnv });
    expect(again.exitCode).toBe(1);
    expect(again.stderr).toContain('turn 1 is the first turn');
  }, 120_000);

  it('HTTP: POST undo and fork need write, GET diff read; each answers as the client does', async () => {
    const tokens = { read: 'read-token-0123456789abcdef', write: 'write-token-0123456789abcdef' };
    const base = loadConfig({ prefix: h.prefix }, {});
    const app = createApp({
      client,
      config: {
        ...base,
        http: {
          ...base.http,
          tokens: Object.entries(tokens).map(([scope, token]) => ({
            name: `${scope}-bot`,
            scope,
            sha256: createHash('sha256').update(token).digest('hex'),
            // The write token may hold one session of its own: a fork takes a slot of it.
            ...(scope === 'write' ? { maxSessions: 1 } : {}),
          })),
        } as typeof base.http,
      },
      logger: pino({ level: 'silent' }),
      bullBoard: false,
    });
    const send = async (method: string, path: string, token: string, body?: unknown) => {
      const r = await app.request(`http://127.0.0.1:7420${path}`, {
        method,
        headers: {
          host: '127.0.0.1:7420',
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: r.status, body: (await r.json()) as Record<string, unknown> };
    };
    const { sessionId: id } = await h.runtime.enqueue({
      prompt: 'RUN: echo one > a.txt',
      options: options(),
      tenant: 'team-a',
    });
    expect((await turnEnded(h.runtime, id, 1)).state).toBe('completed');
    await turn(id, 2, 'RUN: echo two > b.txt');
    await settled(id);

    const diff = await send('GET', `/api/sessions/${id}/diff?turn=2&stat=1`, tokens.read);
    expect(diff.status).toBe(200);
    expect(diff.body).toMatchObject({ sessionId: id, turn: 2, from: 1 });
    expect(diff.body.diff).toMatch(/b\.txt \| 1 \+/);
    expect((await send('GET', `/api/sessions/${id}/diff?turn=0`, tokens.read)).status).toBe(400);
    expect((await send('GET', `/api/sessions/${id}/diff?turn=5`, tokens.read)).status).toBe(400);

    expect((await send('POST', `/api/sessions/${id}/fork`, tokens.read, { as: `${id}-h` })).status).toBe(403);
    expect((await send('POST', `/api/sessions/${id}/undo`, tokens.read, {})).status).toBe(403);
    expect((await send('POST', `/api/sessions/${id}/fork`, tokens.write, { as: 'bad id' })).status).toBe(400);
    const fork = await send('POST', `/api/sessions/${id}/fork`, tokens.write, { as: `${id}-h`, turn: 1 });
    expect(fork).toMatchObject({ status: 201, body: { sessionId: `${id}-h`, turn: 1 } });
    const twice = await send('POST', `/api/sessions/${id}/fork`, tokens.write, { as: `${id}-h` });
    expect(twice.status).toBe(409);
    // The token's one session is the fork: another is over its cap, and nothing of it is written.
    const capped = await send('POST', `/api/sessions/${id}/fork`, tokens.write, { as: `${id}-h2` });
    expect(capped.status).toBe(429);
    expect(await client.session(`${id}-h2`).inspect()).toBeNull();
    // The fork keeps its source's tenant (fleet limits may match on it).
    const meta = internals(h.runtime).keys;
    expect(await h.connect('t').hget(meta.session(`${id}-h`, 'meta'), 'tenant')).toBe('team-a');

    const undo = await send('POST', `/api/sessions/${id}/undo`, tokens.write, {});
    expect(undo).toMatchObject({ status: 200, body: { sessionId: id, undone: 2, to: 1, cancelled: false } });
    const first = await send('POST', `/api/sessions/${id}/undo`, tokens.write, { force: true });
    expect(first.status).toBe(409);
    expect(String(first.body.error)).toMatch(/first turn/);
    expect((await send('POST', '/api/sessions/no-such/undo', tokens.write, {})).status).toBe(404);
  }, 120_000);
});
