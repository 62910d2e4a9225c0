import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from 'xstate';
import { createSessionMachine } from '../../machines/session.machine.ts';
import { startSessionActor, type SessionActor } from '../../machines/restore.ts';
import { CONTINUATION_PROMPT } from '../../machines/retry-request.ts';
import type { AttemptMeta, AttemptRunner } from '../../machines/types.ts';
import { agentRun } from '../../src/agents/registry.ts';
import { findProcessesByMarker } from '../../src/process/index.ts';
import type { CliMessage } from '../../src/index.ts';
import { parseRetryPolicy } from '../../src/retry/index.ts';
import { startFakeModelServer, type FakeModelServer } from '../support/fake-model-server.ts';
import { createPiEnv, type PiEnv } from '../support/pi-env.ts';
import { piHostOptions } from '../support/runtime.ts';

let server: FakeModelServer;
let env: PiEnv;
let stateDir: string;

beforeAll(async () => {
  server = await startFakeModelServer();
  env = createPiEnv({
    serverUrl: server.url,
    extraModels: ['flaky-500', 'flaky-mid', 'auth-then-text', 'long-then-text'],
  });
  stateDir = mkdtempSync(join(tmpdir(), 'sessiond-state-'));
});

afterAll(async () => {
  await server.close();
  env.cleanup();
  rmSync(stateDir, { recursive: true, force: true });
});

const policy = (() => {
  const parsed = parseRetryPolicy({ initialDelayMs: 50, maxDelayMs: 200, jitter: 'none', maxAttempts: 3 });
  if (!parsed.ok) throw new Error('bad policy');
  return parsed.policy;
})();

function session(model: string) {
  const log: Array<{ message: CliMessage; meta: AttemptMeta }> = [];
  const markers: string[] = [];
  const pi = agentRun('pi');
  const runner: AttemptRunner = (request, { signal }) =>
    pi(
      {
        text: request.text,
        resumeSessionId: request.agentSessionId,
        options: { provider: 'fake', model, cwd: env.cwd, ...piHostOptions(env, stateDir) },
      },
      { signal, onSpawn: (agent) => markers.push(agent.marker) },
    );
  const machine = createSessionMachine(runner, (message, meta) => void log.push({ message, meta }));
  const actor = startSessionActor(machine, { input: { sessionId: `s-${model}`, policy } });
  return { actor, log, markers };
}

const turnEnded = (actor: SessionActor, turn: number) =>
  waitFor(
    actor,
    (s) => s.context.turnIndex === turn && ['completed', 'failed', 'cancelled'].includes(String(s.value)),
    { timeout: 60_000 },
  );

const userTexts = (model: string, index: number): string[] =>
  (server.requestsFor(model)[index]?.body.messages ?? [])
    .filter((m) => m.role === 'user')
    .map((m) => JSON.stringify(m.content));

describe('session machine with the real pi provider', () => {
  it('a 500-then-success turn completes after exactly 2 model requests, the prompt sent once', async () => {
    server.setScript('flaky-500', [{ status: 500 }, { text: 'Recovered answer.' }]);
    const { actor, log } = session('flaky-500');
    actor.send({ type: 'session.prompt', prompt: { id: 'p1', text: 'Explain retries' } });
    const s = await turnEnded(actor, 1);
    expect(s.value).toBe('completed');
    expect(server.requestsFor('flaky-500')).toHaveLength(2);
    expect(s.context.turn!.attempts.map((a) => [a.outcome, a.category])).toEqual([
      ['failed', 'server_error'],
      ['completed', null],
    ]);
    // What pi sends on the retry: the user's prompt once, then the continuation; the failed answer is not there.
    const retried = userTexts('flaky-500', 1);
    expect(retried.filter((t) => t.includes('Explain retries'))).toHaveLength(1);
    expect(retried.at(-1)).toContain(CONTINUATION_PROMPT);
    expect(server.requestsFor('flaky-500')[1]!.body.messages!.filter((m) => m.role === 'assistant')).toHaveLength(0);
    // The log tells the failed attempt's messages from the retry's.
    expect(log.filter((e) => e.message.type === 'terminal.failed').map((e) => e.meta.attempt)).toEqual([1]);
    expect(log.filter((e) => e.message.type === 'terminal.completed').map((e) => e.meta.attempt)).toEqual([2]);
    actor.stop();
  });

  it('a retry after a mid-stream drop does not carry the half answer into the conversation', async () => {
    server.setScript('flaky-mid', [
      { text: ['Half', ' an', ' answer'], then: 'drop', afterChunks: 2 },
      { text: 'Whole answer.' },
    ]);
    const { actor, log } = session('flaky-mid');
    actor.send({ type: 'session.prompt', prompt: { id: 'p1', text: 'Tell me' } });
    const s = await turnEnded(actor, 1);
    expect(s.value).toBe('completed');
    expect(s.context.turn!.attempts[0]).toMatchObject({ category: 'network', promptRecorded: true });
    const retryBody = server.requestsFor('flaky-mid')[1]!.body;
    expect(JSON.stringify(retryBody.messages)).not.toContain('Half an');
    expect(userTexts('flaky-mid', 1).filter((t) => t.includes('Tell me'))).toHaveLength(1);
    expect(
      log
        .filter((e) => e.message.type === 'assistant' && e.meta.attempt === 2)
        .map((e) => (e.message.content as { text: string }).text)
        .join(''),
    ).toBe('Whole answer.');
    actor.stop();
  });

  it('a 401 fails the turn at once after 1 model request; a second prompt then works in the same pi session', async () => {
    server.setScript('auth-then-text', [{ status: 401 }, { text: 'Now it works.' }]);
    const { actor } = session('auth-then-text');
    actor.send({ type: 'session.prompt', prompt: { id: 'p1', text: 'first question' } });
    const first = await turnEnded(actor, 1);
    expect(first.value).toBe('failed');
    expect(first.context.turn).toMatchObject({ failureReason: 'not_retryable' });
    expect(server.requestsFor('auth-then-text')).toHaveLength(1);
    const agentSession = first.context.agentSessionId;

    actor.send({ type: 'session.prompt', prompt: { id: 'p2', text: 'second question' } });
    const second = await turnEnded(actor, 2);
    expect(second.value).toBe('completed');
    expect(second.context.agentSessionId).toBe(agentSession);
    expect(
      userTexts('auth-then-text', 1).map((t) => t.includes('first question') || t.includes('second question')),
    ).toEqual([true, true]);
    actor.stop();
  });

  it('a cancel during a long bash tool ends the turn cancelled with no process of the tree left', async () => {
    const { actor, markers, log } = session('long-tool-grandchild');
    actor.send({ type: 'session.prompt', prompt: { id: 'p1', text: 'Run a long command' } });
    await until(() => log.some((e) => e.message.type === 'tool.update'));
    actor.send({ type: 'session.cancel', reason: 'test' });
    const s = await turnEnded(actor, 1);
    expect(s.value).toBe('cancelled');
    expect(markers).toHaveLength(1);
    expect(await findProcessesByMarker(markers[0]!)).toEqual([]);
    expect(log.some((e) => e.message.type === 'tool.call')).toBe(true);
    actor.stop();
  });
});

async function until(condition: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
