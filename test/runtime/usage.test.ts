import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { createApp } from '../../src/interfaces/http/app.ts';
import { createLogger } from '../../src/interfaces/log.ts';
import { summarize } from '../../src/runtime/inspect.ts';
import { RuntimeMetrics } from '../../src/runtime/metrics.ts';
import { DEFAULT_TEXT, type FakeModelServer } from '../support/fake-model-server.ts';
import { rules } from '../support/limits.ts';
import type { PiEnv } from '../support/pi-env.ts';
import { runCli } from '../support/cli.ts';
import { turnEnded, until, type Harness, useRuntimeSuite } from '../support/runtime.ts';
import { workerEnv } from '../support/worker-process.ts';
import { internals } from '../../src/runtime/internals.ts';
import { clientOver } from '../../src/api/bind.ts';

/**
 * Token usage with real pi against the fake model (its usage chunk says how many tokens a request
 * took): summed per attempt, turn and session in the session's meta by the fenced write that
 * stores the terminal message, shown by `inspect` (CLI and API), counted in
 * `sessiond_tokens_total`, and capped per minute by a limit's `maxTokensPerMinute`.
 */

const FLAKY = 'usage-500-then-120-30';
const SECOND = 'usage-200-50';
const CAPPED = 'usage-capped-120-30';
const OTHER = 'usage-uncapped';

let server: FakeModelServer;
let env: PiEnv;
let h: Harness;
let redisUrl: string;

const LIMITS = rules([{ name: 'tpm', match: { model: CAPPED }, maxTokensPerMinute: 100 }]);

function tokensLine(text: string, model: string, kind: string): number {
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`sessiond_tokens_total{agent="pi",model="${model}",kind="${kind}"}`));
  return line === undefined ? 0 : Number(line.split(' ').at(-1));
}

describe('token usage', () => {
  useRuntimeSuite(
    'usage',
    {
      scripts: {
        [FLAKY]: [{ status: 500 }, { text: DEFAULT_TEXT, usage: { prompt_tokens: 120, completion_tokens: 30 } }],
        [SECOND]: { text: DEFAULT_TEXT, usage: { prompt_tokens: 200, completion_tokens: 50 } },
        [CAPPED]: { text: DEFAULT_TEXT, usage: { prompt_tokens: 120, completion_tokens: 30 } },
        [OTHER]: { text: DEFAULT_TEXT, usage: { prompt_tokens: 5, completion_tokens: 5 } },
      },
    },
    async (s) => {
      ({ server, env, h } = s);
      redisUrl = s.redis.url;
      // The only worker of the file: it knows the limit (a worker without it would not enforce it).
      await h.startWorker({ fleetLimits: LIMITS });
    },
  );

  it('sums each attempt’s tokens into its turn and session, shows them in inspect and the API, and counts them once in /metrics', async () => {
    const metrics = new RuntimeMetrics(h.runtime, { cacheMs: 0 });
    // Its first refresh: from here on it counts (what ended before a serve started is only folded into the fleet totals).
    await metrics.render();
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Count my tokens',
      options: { provider: 'fake', model: FLAKY, cwd: env.cwd },
      retryPolicy: { initialDelayMs: 200, jitter: 'none' },
    });
    const first = await turnEnded(h.runtime, sessionId, 1);
    expect(first.state).toBe('completed');
    const s1 = summarize(first);
    // The 500 reported nothing; the answer 120 in / 30 out.
    expect(s1.turn?.attempts.map((a) => [a.outcome, a.usage?.input, a.usage?.output])).toEqual([
      ['failed', undefined, undefined],
      ['completed', 120, 30],
    ]);
    expect(s1.turn?.usage).toMatchObject({ input: 120, output: 30 });
    expect(s1.usage?.total).toMatchObject({ input: 120, output: 30 });
    const m1 = await metrics.render();
    expect(tokensLine(m1, FLAKY, 'input')).toBe(120);
    expect(tokensLine(m1, FLAKY, 'output')).toBe(30);

    await h.runtime.enqueue({ sessionId, prompt: 'And again', options: { model: SECOND } });
    const second = await turnEnded(h.runtime, sessionId, 2);
    expect(second.state).toBe('completed');
    const s2 = summarize(second);
    expect(s2.turn?.usage).toMatchObject({ input: 200, output: 50 });
    expect(s2.usage?.total).toMatchObject({ input: 320, output: 80 });
    expect(s2.usage?.byModel.map((m) => [m.agent, m.model, m.usage.input, m.usage.output])).toEqual(
      expect.arrayContaining([
        ['pi', FLAKY, 120, 30],
        ['pi', SECOND, 200, 50],
      ]),
    );
    // The counter grew by the second turn only, and a refresh that finds nothing new adds nothing.
    const m2 = await metrics.render();
    expect([tokensLine(m2, FLAKY, 'input'), tokensLine(m2, SECOND, 'input'), tokensLine(m2, SECOND, 'output')]).toEqual(
      [120, 200, 50],
    );
    await metrics.refresh(true);
    expect(tokensLine(await metrics.registry.metrics(), SECOND, 'input')).toBe(200);

    // The API's view of the session carries the same sums.
    const app = createApp({
      client: clientOver(h.runtime),
      config: loadConfig({ prefix: h.prefix }, {}),
      logger: createLogger('usage-test', 'silent'),
      dashboard: false,
      bullBoard: false,
    });
    const api = (await (await app.request(`/api/sessions/${sessionId}`)).json()) as ReturnType<typeof summarize>;
    expect(api.usage?.total).toMatchObject({ input: 320, output: 80 });
    expect(api.turn?.attempts[0]?.usage).toMatchObject({ input: 200, output: 50 });

    // So does `sessiond inspect`.
    const cli = await runCli(['inspect', sessionId], {
      env: {
        ...workerEnv({ redisUrl, prefix: h.prefix, env, stateDir: h.stateDir }),
        PATH: process.env.PATH ?? '',
        NO_COLOR: '1',
      },
    });
    expect(cli.exitCode).toBe(0);
    expect(cli.stdout).toMatch(/turn 2: completed {2}tokens 200 in \/ 50 out/);
    expect(cli.stdout).toMatch(/attempt 1: completed, tokens 200 in \/ 50 out/);
    expect(cli.stdout).toMatch(/tokens \(session\): 320 in \/ 80 out/);
    // Without an OTLP endpoint nothing of tracing happens: no trace context is stored.
    expect((await internals(h.runtime).store.meta(sessionId))?.trace).toBeUndefined();
  });

  it('a batch sent again after its reply was lost counts its tokens once', async () => {
    const store = internals(h.runtime).store;
    const sessionId = `usage-replay-${randomUUID().slice(0, 8)}`;
    // A session nobody drives (no activation job): this test holds its lease.
    await store.enqueue(
      sessionId,
      { agent: 'pi', options: '{}' },
      { id: 'p1', text: 'hi', options: {}, enqueuedAt: Date.now() },
      null,
      'no-job',
    );
    const lease = await store.acquire(sessionId, 'test-writer', 30_000);
    if (!lease.ok) throw new Error('no lease');
    const terminal = {
      turn: 1,
      attempt: 1,
      type: 'terminal.completed',
      content: JSON.stringify({ stopReason: 'stop', usage: { input: 10, output: 4 } }),
    };
    const usage = [{ turn: 1, attempt: 1, agent: 'pi', model: 'm', usage: { input: 10, output: 4 }, at: Date.now() }];
    await store.write(sessionId, lease.token, { writeId: 1, messages: [terminal], usage });
    await store.write(sessionId, lease.token, { writeId: 1, messages: [terminal], usage });
    const view = await h.runtime.getSession(sessionId);
    expect(view?.lastSeq).toBe(1);
    expect(view?.usage?.total).toEqual({ input: 10, output: 4 });
    // The next batch (a new number) is counted.
    await store.write(sessionId, lease.token, {
      writeId: 2,
      messages: [{ ...terminal, attempt: 2 }],
      usage: [{ ...usage[0]!, attempt: 2 }],
    });
    const after = await h.runtime.getSession(sessionId);
    expect(after?.usage?.total).toEqual({ input: 20, output: 8 });
    expect(after?.usage?.turn?.attempts.map((a) => [a.attempt, a.usage.input])).toEqual([
      [1, 10],
      [2, 10],
    ]);
  });

  it('over maxTokensPerMinute, new starts on the key wait (reason tokens) while other keys start', async () => {
    const a = await h.runtime.enqueue({
      prompt: 'Spend tokens',
      options: { provider: 'fake', model: CAPPED, cwd: env.cwd },
    });
    const done = await turnEnded(h.runtime, a.sessionId, 1);
    expect(done.state).toBe('completed');
    const endedAt = done.context?.turn?.endedAt ?? Date.now();

    // 150 tokens reported in the last minute, over the cap of 100: the next session on the key waits.
    const b = await h.runtime.enqueue({
      prompt: 'Wait for tokens',
      options: { provider: 'fake', model: CAPPED, cwd: env.cwd },
    });
    const waiting = await until(
      async () => {
        const s = await h.runtime.getSession(b.sessionId);
        return s?.state === 'waiting' ? summarize(s) : null;
      },
      30_000,
      'the second session to wait',
    );
    expect(waiting.waitingFor).toMatchObject({ limit: 'tpm', reason: 'tokens' });
    // It looks again once the first attempt's tokens are a minute old.
    expect(waiting.waitingFor?.until).toBeGreaterThanOrEqual(endedAt + 58_000);
    expect(waiting.waitingFor?.until).toBeLessThanOrEqual(Date.now() + 62_000);

    // Another key is not held back.
    const c = await h.runtime.enqueue({
      prompt: 'Not capped',
      options: { provider: 'fake', model: OTHER, cwd: env.cwd },
    });
    expect((await turnEnded(h.runtime, c.sessionId, 1)).state).toBe('completed');
    expect(server.requestsFor(CAPPED)).toHaveLength(1);
    expect((await h.runtime.getSession(b.sessionId))?.state).toBe('waiting');

    // A waiting session is cancelled like any other.
    await h.runtime.cancel(b.sessionId, 'test over');
    expect((await turnEnded(h.runtime, b.sessionId, 1)).state).toBe('cancelled');
    expect(server.requestsFor(CAPPED)).toHaveLength(1);
  });
});
