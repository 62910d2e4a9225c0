import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { handwrittenProcessor, HANDWRITTEN_QUEUE } from './handwritten.ts';

/**
 * `node --import tsx bench/peers/handwritten-worker.ts <redis-url> <prefix> <messages> <every-ms>`:
 * one worker process of the hand-written reference (see handwritten.ts), for its stalled-job run: its
 * turns emit one message every <every-ms>. Prints "ready" once its worker is up; stops when stdin ends.
 */
const [url, prefix, messages, every] = process.argv.slice(2);
if (url === undefined || prefix === undefined) {
  console.error('usage: handwritten-worker.ts <redis-url> <prefix> <messages> <every-ms>');
  process.exit(2);
}
const redis = new Redis(url, { maxRetriesPerRequest: null });
const connection = new Redis(url, { maxRetriesPerRequest: null });
const worker = new Worker(
  HANDWRITTEN_QUEUE,
  handwrittenProcessor(redis, prefix, Number(messages), Number(every), `pid${process.pid}`),
  {
    connection,
    prefix,
    concurrency: 8,
    // Short, so that the stall below the benchmark's SIGSTOP is noticed within seconds (BullMQ's defaults: 30 s, 30 s).
    lockDuration: 2000,
    stalledInterval: 1000,
  },
);
worker.on('error', () => undefined);
await worker.waitUntilReady();
process.stdout.write('ready\n');
const stop = (): void => {
  void worker.close(true).finally(() => {
    redis.disconnect();
    connection.disconnect();
    process.exit(0);
  });
};
process.stdin.on('end', stop);
process.stdin.on('error', stop);
process.stdin.resume();
process.on('SIGTERM', stop);
