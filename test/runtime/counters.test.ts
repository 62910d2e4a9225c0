import { describe, expect, it } from 'vitest';
import { DEFAULT_TEXT } from '../support/fake-model-server.ts';
import type { PiEnv } from '../support/pi-env.ts';
import { RuntimeMetrics } from '../../src/runtime/metrics.ts';
import { turnEnded, useRuntimeSuite, type Harness } from '../support/runtime.ts';
import { internals } from '../../src/runtime/internals.ts';

/**
 * Attempts and retries are counted where they happen (in the fenced write that records an attempt's
 * end) and folded into fleet totals: a turn that starts and ends between two scrapes is counted, two
 * `serve`s report the same totals, a restarted one too, and a session deleted before any scrape still counts.
 */

const FLAKY = 'counters-500-then-text';
const FLAKY_2 = 'counters-500-then-text-2';

let env: PiEnv;
let h: Harness;

useRuntimeSuite(
  'counters',
  {
    scripts: {
      [FLAKY]: [{ status: 500 }, { text: DEFAULT_TEXT }],
      [FLAKY_2]: [{ status: 500 }, { text: DEFAULT_TEXT }],
    },
  },
  async (s) => {
    ({ env, h } = s);
    await h.startWorker();
  },
);

const value = (text: string, series: string): number => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
};
const ATTEMPTS_OK = 'sessiond_attempts_total{outcome="completed",category="none"}';
const ATTEMPTS_500 = 'sessiond_attempts_total{outcome="failed",category="server_error"}';
const RETRIES_500 = 'sessiond_retries_total{category="server_error"}';
const retryPolicy = { initialDelayMs: 50, maxDelayMs: 50, jitter: 'none', maxAttempts: 3 } as const;

describe('attempts and retries counted where they happen', () => {
  it('two turns run between two scrapes are both counted, once, the same by a second and a restarted serve', async () => {
    const first = new RuntimeMetrics(h.runtime, { cacheMs: 0 });
    const before = await first.render();
    expect(value(before, ATTEMPTS_OK)).toBe(0);

    // Turn 1: a 500, a retry, then success; turn 2: success. No scrape in between: only the second turn is in the snapshot.
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'One',
      options: { provider: 'fake', model: FLAKY, cwd: env.cwd },
      retryPolicy,
    });
    await turnEnded(h.runtime, sessionId, 1);
    await h.runtime.enqueue({ sessionId, prompt: 'Two', options: { provider: 'fake', model: 'text', cwd: env.cwd } });
    const ended = await turnEnded(h.runtime, sessionId, 2);
    expect(ended.state).toBe('completed');
    expect(ended.context?.turn?.attempts).toHaveLength(1);

    const text = await first.render();
    expect(value(text, ATTEMPTS_OK)).toBe(2);
    expect(value(text, ATTEMPTS_500)).toBe(1);
    expect(value(text, RETRIES_500)).toBe(1);

    // Scraped again: nothing counted twice. Another serve (or this one restarted) reports the same fleet totals.
    const again = await first.render();
    const second = await new RuntimeMetrics(h.runtime, { cacheMs: 0 }).render();
    for (const series of [ATTEMPTS_OK, ATTEMPTS_500, RETRIES_500]) {
      expect(value(again, series)).toBe(value(text, series));
      expect(value(second, series)).toBe(value(text, series));
    }
  });

  it('a session deleted before any scrape still counts, and leaves no counter entry behind', async () => {
    const metrics = new RuntimeMetrics(h.runtime, { cacheMs: 0 });
    const before = await metrics.render();
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Doomed',
      options: { provider: 'fake', model: FLAKY_2, cwd: env.cwd },
      retryPolicy,
    });
    await turnEnded(h.runtime, sessionId, 1);
    expect((await h.runtime.deleteSession(sessionId)).deleted).toBe(true);

    const after = await metrics.render();
    expect(value(after, ATTEMPTS_OK) - value(before, ATTEMPTS_OK)).toBe(1);
    expect(value(after, ATTEMPTS_500) - value(before, ATTEMPTS_500)).toBe(1);
    expect(value(after, RETRIES_500) - value(before, RETRIES_500)).toBe(1);
    expect(await internals(h.runtime).redis.hexists(`{${h.prefix}}:counters-folded`, sessionId)).toBe(0);
    expect(await internals(h.runtime).redis.exists(internals(h.runtime).keys.session(sessionId, 'counters'))).toBe(0);
  });
});
