/**
 * One benchmark: a module in bench/ exporting `name` and `run`, listed in
 * bench/run.ts. `run` prints its human-readable lines through `log` and
 * returns one JSON-serializable object, which the runner prints as the
 * benchmark's last line. It throws `BenchFailure` when its own correctness
 * check fails.
 */
export interface Benchmark {
  readonly name: string;
  run(log?: (line: string) => void): Promise<Record<string, unknown>>;
}

/** A benchmark's own check failed: its figures mean nothing. */
export class BenchFailure extends Error {
  override name = 'BenchFailure';
}
