/**
 * `node --import tsx test/support/measure-streams.ts [--bin PATH] [--clients N] [--rounds N] [--max-streams N]`:
 * the stream figures of test/interfaces/http/streams.test.ts (Redis connections and
 * `serve`'s RSS with N live SSE streams) for any checkout's bin, printed as one JSON line.
 * Measure an older checkout with `--bin /path/to/it/bin/sessiond.mjs` (it runs the bin
 * with that checkout's own sources; the worker and the fake model run from this one).
 */
import { Redis } from 'ioredis';
import { SESSIOND_BIN } from './cli.ts';
import { startFakeModelServer } from './fake-model-server.ts';
import { createPiEnv } from './pi-env.ts';
import { startRedis } from './redis.ts';
import { harness } from './runtime.ts';
import { runStreamLoad } from './sse-load.ts';

const args = process.argv.slice(2);
const arg = (name: string) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const clients = Number(arg('--clients') ?? 500);
const rounds = Number(arg('--rounds') ?? 2);
const maxStreams = arg('--max-streams') === undefined ? undefined : Number(arg('--max-streams'));

const redis = await startRedis();
const model = await startFakeModelServer();
model.setScript('live-text', {
  text: Array.from({ length: 30 }, (_, i) => (i === 0 ? 'w0' : ` w${i}`)),
  chunkDelayMs: 50,
});
const env = createPiEnv({ serverUrl: model.url, extraModels: ['live-text'] });
const h = harness(redis.url, env, 'measure-streams');
const admin = new Redis(redis.url);
try {
  await h.startWorker();
  const report = await runStreamLoad({
    h,
    redisUrl: redis.url,
    bin: arg('--bin') ?? SESSIOND_BIN,
    clients,
    rounds,
    ...(maxStreams === undefined ? {} : { maxStreams }),
    options: { provider: 'fake', model: 'text', cwd: env.cwd },
    liveModel: 'live-text',
    admin,
  });
  process.stdout.write(`${JSON.stringify({ bin: arg('--bin') ?? SESSIOND_BIN, ...report })}\n`);
} finally {
  admin.disconnect();
  await h.close();
  await model.close();
  await redis.stop();
  env.cleanup();
}
process.exit(0);
