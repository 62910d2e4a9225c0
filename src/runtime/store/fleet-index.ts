/** One session's change to the fleet-wide indexes (see INDEX in scripts.ts). */
export interface IndexUpdate {
  /** A new session: list it. */
  created?: boolean;
  /** Its activation was added, or ended (at `at`). */
  activation?: 'add' | 'end';
  /** Its machine state changed (the listing by state and the counts follow). */
  state?: string;
  /** It finished and expires at this time (ms), or it is active again ('remove'). */
  expireAt?: number | 'remove';
  /** Something shown in the listing changed (its queued prompts…). */
  touch?: boolean;
  at: number;
}

/** INDEX's arguments per update (see INDEX in scripts.ts). */
export const INDEX_ARITY = 6;

/** INDEX's arguments for one update. */
export function indexArgs(sessionId: string, update: IndexUpdate): string[] {
  const state = update.state ?? '';
  return [
    sessionId,
    update.created === true ? '1' : '',
    update.activation ?? '',
    String(update.at),
    update.expireAt === undefined ? '' : String(update.expireAt),
    update.touch === true && state === '' ? 't' : state,
  ];
}

/** Two updates of one session as one: the later activation change, with its own time (an `end` removes only activations added before it). */
export function mergeUpdates(first: IndexUpdate, later: IndexUpdate): IndexUpdate {
  const timed = later.activation !== undefined ? later : first.activation !== undefined ? first : later;
  const state = later.state ?? first.state;
  const expireAt = later.expireAt ?? first.expireAt;
  return {
    ...(first.created === true || later.created === true ? { created: true } : {}),
    ...(timed.activation === undefined ? {} : { activation: timed.activation }),
    ...(state === undefined ? {} : { state }),
    ...(expireAt === undefined ? {} : { expireAt }),
    ...(first.touch === true || later.touch === true ? { touch: true } : {}),
    at: timed.at,
  };
}

/** How long a batch that failed (Redis unreachable) waits before it is sent again. */
const INDEX_RETRY_MS = 1_000;

/**
 * The fleet-index updates of every session a worker drives, sent as one script call per index shard
 * per tick instead of one per session: the index trails the sessions' own (fenced) writes by that tick. A
 * batch that fails is kept and sent again. Contract: `flush()` resolves once every update queued
 * before it was sent (or has failed and is kept for the next try).
 */
export class IndexBatcher {
  readonly #send: (shard: number, args: string[]) => Promise<unknown>;
  #pending = new Map<string, { shard: number; update: IndexUpdate }>();
  #scheduled = false;
  #retry: NodeJS.Timeout | undefined;
  #chain: Promise<void> = Promise.resolve();

  /** `send`: one INDEX call for the updates of one index shard (each shard is a slot of its own). */
  constructor(send: (shard: number, args: string[]) => Promise<unknown>) {
    this.#send = send;
  }

  add(sessionId: string, shard: number, update: IndexUpdate): void {
    const known = this.#pending.get(sessionId);
    this.#pending.set(sessionId, { shard, update: known === undefined ? update : mergeUpdates(known.update, update) });
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => void this.flush());
  }

  flush(): Promise<void> {
    this.#scheduled = false;
    clearTimeout(this.#retry);
    this.#retry = undefined;
    const run = this.#chain.then(() => this.#sendPending());
    this.#chain = run;
    return run;
  }

  async #sendPending(): Promise<void> {
    if (this.#pending.size === 0) return;
    const batch = this.#pending;
    this.#pending = new Map();
    const byShard = new Map<number, Array<[string, IndexUpdate]>>();
    for (const [sessionId, { shard, update }] of batch) {
      const group = byShard.get(shard) ?? [];
      group.push([sessionId, update]);
      byShard.set(shard, group);
    }
    let failed = false;
    await Promise.all(
      [...byShard].map(async ([shard, group]) => {
        try {
          await this.#send(
            shard,
            group.flatMap(([sessionId, update]) => indexArgs(sessionId, update)),
          );
        } catch {
          failed = true;
          // Put the group back (under what was queued since) and try again later.
          for (const [sessionId, update] of group) {
            const later = this.#pending.get(sessionId);
            this.#pending.set(sessionId, {
              shard,
              update: later === undefined ? update : mergeUpdates(update, later.update),
            });
          }
        }
      }),
    );
    if (failed && this.#retry === undefined) {
      this.#retry = setTimeout(() => void this.flush(), INDEX_RETRY_MS);
      this.#retry.unref();
    }
  }
}
