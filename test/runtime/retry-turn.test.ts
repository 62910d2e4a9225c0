import { describe, expect, it } from 'vitest';
import { CONTINUATION_PROMPT } from '../../machines/retry-request.ts';
import { ConflictError } from '../../src/runtime/lifecycle/errors.ts';
import { NotFoundError } from '../../src/runtime/runtime.ts';
import { runCli } from '../support/cli.ts';
import type { FakeModelServer } from '../support/fake-model-server.ts';
import type { PiEnv } from '../support/pi-env.ts';
import {
  assistantText,
  expectWholeLog,
  turnEnded,
  type Harness,
  useRuntimeSuite,
  type RuntimeSuite,
} from '../support/runtime.ts';

/**
 * `sessiond retry ID`: the failed last turn runs again as a new turn, under the policy in force, and
 * the agent's conversation is continued as a machine retry would (real pi: the prompt is in it once).
 */

const FLAKY = 'retry-turn-500-then-ok';
let server: FakeModelServer;
let env: PiEnv;
let h: Harness;
let cliEnv: RuntimeSuite['cliEnv'];

useRuntimeSuite('retry-turn', { scripts: { [FLAKY]: [{ status: 500 }, { text: 'Recovered answer.' }] } }, (s) => {
  ({ server, env, h, cliEnv } = s);
});

/** The user messages pi sent in request `index` for the model. */
const userTexts = (index: number): string[] =>
  (server.requestsFor(FLAKY)[index]?.body.messages ?? [])
    .filter((m) => m.role === 'user')
    .map((m) => JSON.stringify(m.content));

describe('retry of a failed turn', () => {
  it('re-runs the failed turn as turn 2 with the prompt once in the conversation (real pi), once however many retries race', async () => {
    await h.startWorker();
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Explain retries',
      options: { provider: 'fake', model: FLAKY, cwd: env.cwd },
      retryPolicy: { enabled: false },
    });
    const failed = await turnEnded(h.runtime, sessionId, 1);
    expect(failed.context?.turn).toMatchObject({ index: 1, status: 'failed', failureReason: 'retry_disabled' });
    expect(failed.context?.turn?.attempts.map((a) => [a.category, a.promptRecorded])).toEqual([['server_error', true]]);

    // Two operators at once: one retry is queued, the other is refused.
    const [cli, other] = await Promise.all([
      runCli(['retry', sessionId, '--json'], { env: cliEnv() }),
      h.runtime.retry(sessionId).then(
        (r) => r,
        (e: Error) => e,
      ),
    ]);
    const winners = [cli.exitCode === 0 ? JSON.parse(cli.stdout) : null, other instanceof Error ? null : other].filter(
      (r) => r !== null,
    );
    expect(winners).toEqual([{ sessionId, turn: 2, retryOf: 1 }]);
    if (other instanceof Error) expect(other).toBeInstanceOf(ConflictError);
    else expect(cli).toMatchObject({ exitCode: 1, stderr: expect.stringMatching(/nothing to retry|prompts waiting/) });

    const retried = await turnEnded(h.runtime, sessionId, 2);
    expect(retried.context?.turn).toMatchObject({
      index: 2,
      status: 'completed',
      text: 'Explain retries',
      retryOf: { turn: 1, promptRecorded: true },
    });
    expect(retried.context?.turn?.attempts.map((a) => a.attempt)).toEqual([1]);
    expect(server.requestsFor(FLAKY)).toHaveLength(2);
    // What the model saw on the retry: the user's prompt once, then the continuation; no failed answer.
    const sent = userTexts(1);
    expect(sent.filter((t) => t.includes('Explain retries'))).toHaveLength(1);
    expect(sent.at(-1)).toContain(CONTINUATION_PROMPT);
    expect(server.requestsFor(FLAKY)[1]!.body.messages!.filter((m) => m.role === 'assistant')).toHaveLength(0);
    const log = await h.runtime.readMessages(sessionId);
    expectWholeLog(log);
    expect(assistantText(log.filter((m) => m.turn === 2))).toBe('Recovered answer.');
    expect(log.filter((m) => m.turn === 2).map((m) => m.type)).toEqual(
      expect.arrayContaining(['session.resumed', 'terminal.completed']),
    );
  });

  it('refuses a session whose last turn did not fail (exit 1), and an unknown id (exit 3), writing nothing', async () => {
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Say hi',
      options: { provider: 'fake', model: 'text', cwd: env.cwd },
    });
    await turnEnded(h.runtime, sessionId, 1);
    const before = await h.runtime.getSession(sessionId);
    await expect(h.runtime.retry(sessionId)).rejects.toThrow(/is completed, not failed: there is nothing to retry/);
    const cli = await runCli(['retry', sessionId], { env: cliEnv() });
    expect(cli.exitCode).toBe(1);
    expect(cli.stderr).toContain('not failed');
    expect(await h.runtime.getSession(sessionId)).toEqual(before);
    await expect(h.runtime.retry('never-seen')).rejects.toBeInstanceOf(NotFoundError);
    expect((await runCli(['retry', 'never-seen'], { env: cliEnv() })).exitCode).toBe(3);
  });
});
