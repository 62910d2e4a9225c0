import { performance } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * A full garbage collection, so that one measurement does not pay for the
 * garbage of the one before. `npm run bench` cannot pass --expose-gc, so the
 * flag is set at run time; without it this does nothing.
 */
export const collectGarbage: () => void = (() => {
  try {
    setFlagsFromString('--expose-gc');
    const gc: unknown = runInNewContext('gc');
    if (typeof gc === 'function') return () => void gc();
  } catch {
    // no gc available: measurements are only a little noisier
  }
  return () => undefined;
})();

export interface Timing {
  /** Wall-clock milliseconds. */
  wallMs: number;
  /** Milliseconds of CPU (user + system) of the whole process, GC threads included: less disturbed by other processes. */
  cpuMs: number;
}

/** How long `fn` takes, measured after a full GC. */
export function time(fn: () => void): Timing {
  collectGarbage();
  const cpu = process.cpuUsage();
  const start = performance.now();
  fn();
  const wallMs = performance.now() - start;
  const used = process.cpuUsage(cpu);
  return { wallMs, cpuMs: (used.user + used.system) / 1000 };
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const mid = Math.floor(sorted.length / 2);
  const upper = sorted[mid] ?? Number.NaN;
  return sorted.length % 2 === 1 ? upper : ((sorted[mid - 1] ?? Number.NaN) + upper) / 2;
}

export function round(value: number, digits: number): number {
  const scale = 10 ** digits;
  return Math.round(value * scale) / scale;
}

/** Decimal megabytes (10^6 bytes), as the benchmarks report sizes. */
export function mb(bytes: number): number {
  return bytes / 1e6;
}
