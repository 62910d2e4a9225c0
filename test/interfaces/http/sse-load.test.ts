import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { RunningServer } from '../../../src/interfaces/http/server.ts';
import { SESSIOND_BIN } from '../../support/cli.ts';
import { type PiEnv } from '../../support/pi-env.ts';
import { type RedisServer } from '../../support/redis.ts';
import { useRuntimeSuite, type Harness } from '../../support/runtime.ts';
import { runStreamLoad } from '../../support/sse-load.ts';

/**
 * 500 concurrent SSE clients against one `sessiond serve` process (a load test: `npm run test:long`;
 * the streams' limits, the hub and the tickets are in streams.test.ts).
 */

const SLOW = Array.from({ length: 40 }, (_, i) => (i === 0 ? 's0' : ` s${i}`));
const LIVE = Array.from({ length: 30 }, (_, i) => (i === 0 ? 'w0' : ` w${i}`));

let redis: RedisServer;
let env: PiEnv;
let h: Harness;
const servers: RunningServer[] = [];
useRuntimeSuite(
  'http-sse-load',
  {
    scripts: { 'live-text': { text: LIVE, chunkDelayMs: 50 }, 'slow-live': { text: SLOW, chunkDelayMs: 100 } },
    cleanup: () => Promise.all(servers.map((s) => s.close(500))).then(() => undefined),
  },
  async (s) => {
    ({ redis, env, h } = s);
    await h.startWorker();
  },
);

const opts = (model: string) => ({ provider: 'fake', model, cwd: env.cwd });

describe('500 concurrent SSE clients against one sessiond serve', () => {
  it('Redis connections stay bounded, client 501 over the cap gets 503, every client receives every message of a live turn in order, and the heap goes back once they leave', async () => {
    const admin = new Redis(redis.url);
    try {
      const report = await runStreamLoad({
        h,
        redisUrl: redis.url,
        bin: SESSIOND_BIN,
        clients: 500,
        maxStreams: 500,
        rounds: 2,
        options: opts('text'),
        liveModel: 'live-text',
        admin,
      });
      console.log(`stream figures: ${JSON.stringify(report)}`);
      for (const round of report.rounds) {
        expect(round.overCap).toEqual({ status: 503, retryAfter: '5' });
        expect(round.complete).toBe(500);
        expect(round.liveMessages).toBeGreaterThan(LIVE.length);
        // One blocking reader for every stream: 500 streams add one connection, not 500.
        expect(round.redisClients.streaming - report.idle.redisClients).toBeLessThanOrEqual(1);
        expect(round.redisClients.after - report.idle.redisClients).toBeLessThanOrEqual(1);
      }
      // Nothing of 500 streams stays behind: a second round leaves the heap where the first left it
      // (the per-stream connections kept in a list grew it by about 4 MiB per round).
      const [first, second] = report.rounds;
      expect((second?.heapMiB.after ?? Infinity) - (first?.heapMiB.after ?? 0)).toBeLessThan(1.5);
    } finally {
      admin.disconnect();
    }
  }, 300_000);
});
