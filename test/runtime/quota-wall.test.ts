import { tmpdir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { InputError } from '../../src/errors.ts';
import { boundedRetryPolicy, deploymentPolicy } from '../../src/runtime/deployment-policy.ts';
import { summarize } from '../../src/runtime/inspect.ts';
import { RuntimeMetrics } from '../../src/runtime/metrics.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import { DEFAULT_RETRY_POLICY } from '../../src/retry/index.ts';
import { runCli } from '../support/cli.ts';
import { DEFAULT_TEXT, type FakeModelServer, type ScriptStep } from '../support/fake-model-server.ts';
import { httpPi } from '../support/limits.ts';
import type { PiEnv } from '../support/pi-env.ts';
import { turnEnded, until, type Harness, useRuntimeSuite, type RuntimeSuite } from '../support/runtime.ts';

/**
 * Quota walls with real workers, Redis and an agent making a real HTTP request: a 429 whose reset lies
 * past maxRetryAfterMs parks the session (no worker slot, its attempts untouched) until the reset, or
 * until an operator resumes it; `counted` spends the attempt; a reset past maxParkMs fails the turn.
 */

const WALL = 'wall-shared';
const EARLY = 'wall-resume';
const COUNTED = 'wall-counted';
const TOO_LONG = 'wall-too-long';
const WALL_MS = 8000;

let server: FakeModelServer;
let env: PiEnv;
let h: Harness;
let cliEnv: RuntimeSuite['cliEnv'];
/** The provider's reset of the shared wall: set by the first request, the same for every session. */
let wallUntil: number | null = null;

const answer: ScriptStep = { text: DEFAULT_TEXT, chunkDelayMs: 0 };
const tooMany = (seconds: number): ScriptStep => ({ status: 429, headers: { 'retry-after': String(seconds) } });

useRuntimeSuite(
  'quota-wall',
  {
    scripts: {
      // An account's quota wall: every request before the reset gets a 429 with what remains of it.
      [WALL]: () => {
        wallUntil ??= Date.now() + WALL_MS;
        const left = wallUntil - Date.now();
        return left > 0 ? tooMany(Math.ceil(left / 1000)) : answer;
      },
      [EARLY]: ({ index }) => (index === 0 ? tooMany(3600) : answer),
      [COUNTED]: () => tooMany(3600),
      [TOO_LONG]: () => tooMany(3600),
    },
  },
  (s) => {
    ({ server, env, h, cliEnv } = s);
  },
);

const options = (model: string) => ({ provider: 'fake', model, cwd: env.cwd });
async function parked(sessionId: string) {
  const view = await h.runtime.getSession(sessionId);
  return view?.state === 'parked' ? summarize(view) : null;
}

describe('quota walls', () => {
  it('parks every session behind the wall with its attempts untouched and no worker slot held; they resume by themselves at the reset', async () => {
    const worker = await h.startWorker({ concurrency: 4, agentOptions: { pi: httpPi(env, h, server.url) } });
    // maxAttempts 1: had the wall's attempt counted, no second attempt could run. Any Retry-After is past maxRetryAfterMs 0.
    const retryPolicy = { maxAttempts: 1, maxRetryAfterMs: 0, jitter: 'none' };
    const ids: string[] = [];
    for (let i = 0; i < 3; i += 1)
      ids.push((await h.runtime.enqueue({ prompt: `walled ${i}`, options: options(WALL), retryPolicy })).sessionId);

    const views = await until(async () => {
      const all = await Promise.all(ids.map(parked));
      return all.every((v) => v !== null) ? all : null;
    }, 60_000);
    const reset = wallUntil;
    if (reset === null) throw new Error('the wall was never hit');
    for (const view of views) {
      if (view === null) throw new Error('unreachable');
      // Shown as parked with the provider's reset (Retry-After is in whole seconds: at most 1 s later).
      expect(view.parkedUntil?.free).toBe(true);
      expect(view.parkedUntil!.until).toBeGreaterThanOrEqual(reset);
      expect(view.parkedUntil!.until).toBeLessThanOrEqual(reset + 1500);
      expect(view.turn).toMatchObject({ status: 'parked', attemptsCounted: 0 });
      expect(view.turn!.attempts.map((a) => [a.outcome, a.category, a.quotaWall])).toEqual([
        ['failed', 'rate_limited', 'free'],
      ]);
    }
    // Parked, they hold no worker slot.
    expect(worker.activeSessions.filter((id) => ids.includes(id))).toEqual([]);
    // Metrics: three parked, the earliest reset among them.
    const metrics = new RuntimeMetrics(h.runtime, { cacheMs: 0 });
    const earliest = Math.min(...views.map((v) => v!.parkedUntil!.until)) / 1000;
    const parkedText = await metrics.render();
    expect(parkedText).toContain('sessiond_sessions{state="parked"} 3');
    expect(parkedText).toContain(`sessiond_parked_next_reset_timestamp_seconds ${earliest}`);

    const ended = await Promise.all(ids.map((id) => turnEnded(h.runtime, id, 1, 120_000)));
    expect(ended.map((v) => v.state)).toEqual(['completed', 'completed', 'completed']);
    for (const v of ended) expect(v.context!.turn!.attempts).toHaveLength(2);
    const endedText = await metrics.render();
    expect(endedText).toContain('sessiond_quota_walls_total{attempts="free"} 3');
    expect(endedText).toMatch(/^sessiond_parked_next_reset_timestamp_seconds 0$/m);
    const requests = server.requestsFor(WALL);
    // Each session asked once before the reset, and not again until it.
    expect(requests.filter((r) => r.at < reset)).toHaveLength(3);
    expect(requests.filter((r) => r.at >= reset)).toHaveLength(3);
  });

  it('sessiond resume ID resumes a parked session before its reset (an hour away); one not parked is refused', async () => {
    await h.startWorker({ concurrency: 2, agentOptions: { pi: httpPi(env, h, server.url) } });
    const { sessionId } = await h.runtime.enqueue({ prompt: 'early', options: options(EARLY) });
    const view = await until(() => parked(sessionId), 60_000);
    expect(view.parkedUntil!.until - Date.now()).toBeGreaterThan(3_500_000);
    const resumed = await runCli(['resume', sessionId, '--json'], { env: cliEnv() });
    expect(resumed.exitCode).toBe(0);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ sessionId, turn: 1, parkedUntil: view.parkedUntil!.until });
    const ended = await turnEnded(h.runtime, sessionId, 1, 60_000);
    expect(ended.state).toBe('completed');
    expect(server.requestsFor(EARLY)).toHaveLength(2);
    const again = await runCli(['resume', sessionId], { env: cliEnv() });
    expect(again.exitCode).toBe(1);
    expect(again.stderr).toContain('not parked');
  });

  it('counted spends the attempt (maxAttempts 1: the turn fails attempts_exhausted); a reset past maxParkMs fails the turn quota_wall_too_long', async () => {
    await h.startWorker({ concurrency: 2, agentOptions: { pi: httpPi(env, h, server.url) } });
    const counted = await h.runtime.enqueue({
      prompt: 'counted',
      options: options(COUNTED),
      retryPolicy: { maxAttempts: 1, rateLimitAttempts: 'counted' },
    });
    const tooLong = await h.runtime.enqueue({
      prompt: 'too long',
      options: options(TOO_LONG),
      retryPolicy: { maxParkMs: 60_000 },
    });
    const [c, t] = await Promise.all([
      turnEnded(h.runtime, counted.sessionId),
      turnEnded(h.runtime, tooLong.sessionId),
    ]);
    expect(summarize(c).turn).toMatchObject({
      status: 'failed',
      failureReason: 'attempts_exhausted',
      attemptsCounted: 1,
    });
    expect(summarize(t).turn).toMatchObject({ status: 'failed', failureReason: 'quota_wall_too_long' });
    expect(summarize(t).lastFailure).toMatchObject({ category: 'rate_limited' });
    expect(server.requestsFor(COUNTED)).toHaveLength(1);
    expect(server.requestsFor(TOO_LONG)).toHaveLength(1);
  });

  it('the deployment bounds quota walls: a longer maxParkMs or free walls where it counts them are refused, a stored policy is clamped', async () => {
    const policy = deploymentPolicy({
      workspace: tmpdir(),
      policy: { maxParkMs: 60_000, rateLimitAttempts: 'counted' },
    });
    const rt = new Runtime({ connect: h.connect, prefix: h.prefix, policy });
    try {
      const refused = await rt
        .enqueue({
          prompt: 'x',
          options: options(WALL),
          retryPolicy: { maxParkMs: 120_000, rateLimitAttempts: 'free' },
        })
        .catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(InputError);
      expect((refused as InputError).issues.map((i) => i.field).sort()).toEqual([
        'retryPolicy.maxParkMs',
        'retryPolicy.rateLimitAttempts',
      ]);
      expect(await rt.setPolicy({ maxParkMs: 120_000 })).toMatchObject({ ok: false, errors: [{ field: 'maxParkMs' }] });
      expect(boundedRetryPolicy(DEFAULT_RETRY_POLICY, policy)).toMatchObject({
        maxParkMs: 60_000,
        rateLimitAttempts: 'counted',
      });
    } finally {
      await rt.close();
    }
  });
});
