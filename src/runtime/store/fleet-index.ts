/** One session's change to the fleet-wide indexes (see INDEX in scripts.ts). */
export interface IndexUpdate {
  /** A new session: list it. */
  created?: boolean;
  /** Its activation was added, or ended (at `at`). */
  activation?: 'add' | 'end';
  at: number;
}

/** INDEX's four arguments for one update. */
export function indexArgs(sessionId: string, update: IndexUpdate): string[] {
  return [sessionId, update.created === true ? '1' : '', update.activation ?? '', String(update.at)];
}

/** Two updates of one session as one: the later activation change, with its own time (an `end` removes only activations added before it). */
export function mergeUpdates(first: IndexUpdate, later: IndexUpdate): IndexUpdate {
  const timed = later.activation !== undefined ? later : first.activation !== undefined ? first : later;
  return {
    ...(first.created === true || later.created === true ? { created: true } : {}),
    ...(timed.activation === undefined ? {} : { activation: timed.activation }),
    at: timed.at,
  };
}

/** How long a batch that failed (Redis unreachable) waits before it is sent again. */
const INDEX_RETRY_MS = 1_000;

/**
 * The fleet-index updates of every session a worker drives, sent as one script call per tick
 * instead of one per session: the index trails the sessions' own (fenced) writes by that tick. A
 * batch that fails is kept and sent again. Contract: `flush()` resolves once every update queued
 * before it was sent (or has failed and is kept for the next try).
 */
export class IndexBatcher {
  readonly #send: (args: string[]) => Promise<unknown>;
  #pending = new Map<string, IndexUpdate>();
  #scheduled = false;
  #retry: NodeJS.Timeout | undefined;
  #chain: Promise<void> = Promise.resolve();

  constructor(send: (args: string[]) => Promise<unknown>) {
    this.#send = send;
  }

  add(sessionId: string, update: IndexUpdate): void {
    const known = this.#pending.get(sessionId);
    this.#pending.set(sessionId, known === undefined ? update : mergeUpdates(known, update));
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
    try {
      await this.#send([...batch].flatMap(([sessionId, update]) => indexArgs(sessionId, update)));
    } catch {
      // Put the batch back (under what was queued since) and try again later.
      for (const [sessionId, update] of batch) {
        const later = this.#pending.get(sessionId);
        this.#pending.set(sessionId, later === undefined ? update : mergeUpdates(update, later));
      }
      if (this.#retry === undefined) {
        this.#retry = setTimeout(() => void this.flush(), INDEX_RETRY_MS);
        this.#retry.unref();
      }
    }
  }
}
