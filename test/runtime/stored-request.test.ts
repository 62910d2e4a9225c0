import { describe, expect, it } from 'vitest';
import type { FakeModelServer } from '../support/fake-model-server.ts';
import type { PiEnv } from '../support/pi-env.ts';
import { turnEnded, type Harness, useRuntimeSuite } from '../support/runtime.ts';
import { internals } from '../../src/runtime/internals.ts';

/**
 * Defense in depth: whoever can write to Redis must not be able to widen what an agent may do.
 * The worker checks the stored request again at the start of every attempt, as the caller schema
 * and the deployment policy would at enqueue, and refuses it as `bad_request` before any agent runs.
 */

let server: FakeModelServer;
let env: PiEnv;
let h: Harness;

useRuntimeSuite('stored-request', {}, (s) => {
  ({ server, env, h } = s);
});

async function tampered(
  change: (sessionId: string) => Promise<unknown>,
): Promise<{ category: string | undefined; text: string }> {
  const { sessionId } = await h.runtime.enqueue({
    prompt: 'Say hello',
    options: { provider: 'fake', model: 'text', cwd: env.cwd },
    retryPolicy: { maxAttempts: 3 },
  });
  // No worker runs yet: the change lands before any attempt. Each case starts a worker of its own
  // after its change (one left running by an earlier case could take the session first).
  await change(sessionId);
  const worker = await h.startWorker();
  const view = await turnEnded(h.runtime, sessionId).finally(() => worker.close(2000));
  expect(view.state).toBe('failed');
  expect(view.context?.turn?.failureReason).toBe('not_retryable');
  const terminal = (await h.runtime.readMessages(sessionId)).find((m) => m.type === 'terminal.failed');
  const content = terminal?.content as { category?: string; text?: string } | undefined;
  return { category: content?.category, text: content?.text ?? '' };
}

/** Rewrites the options of the session's queued prompt, as a Redis writer could. */
async function rewritePrompt(sessionId: string, options: Record<string, unknown>): Promise<void> {
  const key = internals(h.runtime).keys.session(sessionId, 'inbox');
  const [raw] = await internals(h.runtime).redis.lrange(key, 0, 0);
  await internals(h.runtime).redis.lset(key, 0, JSON.stringify({ ...(JSON.parse(raw ?? '{}') as object), options }));
}

describe('a stored request is checked again by the worker', () => {
  it('an executable written into the session options in Redis fails the turn as bad_request, and no agent runs', async () => {
    const failure = await tampered((id) =>
      internals(h.runtime).redis.hset(
        internals(h.runtime).keys.session(id, 'meta'),
        'options',
        JSON.stringify({
          provider: 'fake',
          model: 'text',
          cwd: env.cwd,
          command: '/bin/sh',
          env: { X: '1' },
          extraArgs: ['-c', 'id'],
        }),
      ),
    );
    expect(failure.category).toBe('bad_request');
    expect(failure.text).toMatch(/the stored request was refused at the worker: options: .*command/);
    expect(server.requestsFor('text')).toHaveLength(0);
  });

  it('a queued prompt rewritten in Redis above a ceiling (Codex danger-full-access) fails as bad_request naming the rule', async () => {
    const failure = await tampered((id) =>
      rewritePrompt(id, { agent: 'codex', sandbox: 'danger-full-access', cwd: env.cwd }),
    );
    expect(failure.category).toBe('bad_request');
    expect(failure.text).toMatch(
      /options.sandbox: "danger-full-access" is above this deployment's ceiling "workspace-write"/,
    );
  });

  it('a cwd moved outside the roots in Redis is refused the same way', async () => {
    const failure = await tampered((id) => rewritePrompt(id, { provider: 'fake', model: 'text', cwd: '/' }));
    expect(failure.category).toBe('bad_request');
    expect(failure.text).toMatch(/options.cwd: "\/" is outside this deployment's allowed roots/);
  });
});
