// Preloaded (`node --import <this> bin/sessiond.mjs worker`) into the worker
// processes the e2e and scaling benchmarks start. It changes nothing else in
// the worker; it adds:
// - on SIGUSR2: a full GC (when the runtime allows one), then one stderr line
//   `bench-memory-probe {"rss":…,"heapUsed":…,"heapTotal":…,"external":…,"arrayBuffers":…}`;
// - a tie to the benchmark: when stdin (a pipe from the benchmark) ends, the
//   benchmark is gone however it ended, so the worker stops as on SIGTERM
//   (graceful: 2 s of grace for its agents), and is SIGKILLed 6 s later if still there.
// It is passed on the worker's own command line, not in NODE_OPTIONS, so the
// agent processes the worker starts do not load it.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

let gc = () => undefined;
try {
  setFlagsFromString('--expose-gc');
  const found = runInNewContext('gc');
  if (typeof found === 'function') gc = () => found();
} catch {
  // no GC on demand: the figures are a little noisier
}

process.on('SIGUSR2', () => {
  gc();
  const m = process.memoryUsage();
  process.stderr.write(
    `bench-memory-probe ${JSON.stringify({ rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, arrayBuffers: m.arrayBuffers })}\n`,
  );
});

if (!process.stdin.isTTY) {
  const parentGone = () => {
    process.kill(process.pid, 'SIGTERM');
    setTimeout(() => process.kill(process.pid, 'SIGKILL'), 6_000).unref();
  };
  process.stdin.on('end', parentGone);
  process.stdin.on('error', parentGone);
  process.stdin.resume();
}
