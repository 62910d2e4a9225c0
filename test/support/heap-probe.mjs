// Preloaded into a measured process (node --expose-gc --import): on SIGUSR2 it collects
// garbage and prints its heap and RSS as one stderr line, so a test can read the memory
// the process holds (RSS alone keeps V8's high-water mark).
process.on('SIGUSR2', () => {
  globalThis.gc?.();
  globalThis.gc?.();
  const m = process.memoryUsage();
  process.stderr.write(`sessiond-heap ${JSON.stringify({ heapUsed: m.heapUsed, rss: m.rss, external: m.external })}\n`);
});
