/**
 * The peers benchmark's checks on message logs (pure functions, unit-tested in
 * test/bench/peers-log-checks.test.ts): what a kill -9 or a stalled worker did to them.
 */

export type Entry = { seq: number; attempt: number; type: string; content: unknown };

/**
 * Compares each session's log before a kill (a prefix, as a reader saw it) with its log after
 * recovery, for a deterministic agent whose turn is `session.started`, `perTurn` − 2 assistant
 * deltas cycling through `deltas`, one terminal message:
 * - `lost`: messages of the prefix missing or changed afterwards, plus one per log whose seqs are
 *   not 1..n (a gap);
 * - `duplicated`: entries an attempt holds twice — a second `session.started` or terminal message in
 *   one attempt, an assistant delta out of the agent's order or past its count (what a write applied
 *   twice, or a replay that re-appended, leaves);
 * - `extra`: the messages beyond one turn of `perTurn` (interrupted attempts' output, kept);
 * - `attempts`: each log's highest attempt number.
 */
export function compareLogs(
  before: ReadonlyMap<string, readonly Entry[]>,
  after: ReadonlyMap<string, readonly Entry[]>,
  perTurn: number,
  deltas: readonly string[],
): { lost: number; duplicated: number; extra: number; attempts: number[] } {
  let lost = 0;
  let duplicated = 0;
  let extra = 0;
  const attempts: number[] = [];
  const key = (m: Entry): string => `${m.seq}|${m.attempt}|${m.type}|${JSON.stringify(m.content)}`;
  for (const [id, pre] of before) {
    const post = after.get(id) ?? [];
    const postKeys = new Set(post.map(key));
    lost += pre.filter((m) => !postKeys.has(key(m))).length;
    if (post.some((m, i) => m.seq !== i + 1)) lost += 1;
    const byAttempt = new Map<number, Entry[]>();
    for (const m of post) byAttempt.set(m.attempt, [...(byAttempt.get(m.attempt) ?? []), m]);
    for (const entries of byAttempt.values()) {
      const started = entries.filter((m) => m.type === 'session.started').length;
      const terminals = entries.filter((m) => m.type.startsWith('terminal.')).length;
      duplicated += Math.max(0, started - 1) + Math.max(0, terminals - 1);
      entries
        .filter((m) => m.type === 'assistant')
        .forEach((m, j) => {
          const text = (m.content as { text?: unknown } | null)?.text;
          if (j >= perTurn - 2 || text !== deltas[j % deltas.length]) duplicated += 1;
        });
    }
    extra += Math.max(0, post.length - perTurn);
    attempts.push(Math.max(0, ...post.map((m) => m.attempt)));
  }
  return { lost, duplicated, extra, attempts };
}

export interface StallCount {
  turns: number;
  /** Turns whose agent ran on two workers. */
  ranTwice: number;
  /** Turns with more than one `terminal.completed` in their log. */
  completedTwice: number;
  /** Messages a worker wrote for a turn after another worker had started it again. */
  staleWrites: number;
  /** Messages in the logs beyond one turn each. */
  extraMessages: number;
}

/** Counts the stall's effects from each turn's log: entries in the order they were written, each with the run/attempt that wrote it. */
export function countStall(
  logs: ReadonlyArray<ReadonlyArray<{ type: string; by: string }>>,
  perTurn: number,
): StallCount {
  const c: StallCount = { turns: logs.length, ranTwice: 0, completedTwice: 0, staleWrites: 0, extraMessages: 0 };
  for (const log of logs) {
    const runs = [...new Set(log.map((m) => m.by))];
    if (runs.length > 1) c.ranTwice += 1;
    if (log.filter((m) => m.type === 'terminal.completed').length > 1) c.completedTwice += 1;
    // A write by an earlier run after a later run's first write.
    const firstAt = new Map(runs.map((r) => [r, log.findIndex((m) => m.by === r)]));
    log.forEach((m, i) => {
      const mine = runs.indexOf(m.by);
      if (runs.slice(mine + 1).some((later) => (firstAt.get(later) ?? Infinity) < i)) c.staleWrites += 1;
    });
    c.extraMessages += Math.max(0, log.length - perTurn);
  }
  return c;
}
