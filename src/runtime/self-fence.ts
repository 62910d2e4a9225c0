/**
 * Self-fencing of a session's holder. A lease set (or renewed) by a command this worker sent at
 * local time t lives in Redis until at least t + ttl: Redis starts its TTL when the command arrives,
 * after t. So once `t + ttl - margin` has passed with no later renewal known to have landed, this
 * worker can no longer prove it holds the session, and another may take it at `t + ttl`: it stops
 * its agent (SIGKILL, whole tree) and writes nothing more, before that. The margin covers clock
 * rates that differ between this host and Redis's (1 % of 30 s is 300 ms; real clocks differ by
 * parts per million) and the kill itself; it does not cover this process being paused (a SIGSTOP,
 * a stop-the-world pause) across the deadline: fencing tokens still keep such a holder's writes out.
 * Times are monotonic (performance.now()): a wall-clock step changes nothing.
 */

/** The margin kept before the lease may lapse: a tenth of it, at least 200 ms (at most half of it). */
export function selfFenceMarginMs(leaseTtlMs: number): number {
  return Math.min(Math.floor(leaseTtlMs / 2), Math.max(200, Math.floor(leaseTtlMs / 10)));
}

/** How often a holder renews its lease: four times per TTL, so three renewals may fail or lag before it fences itself. */
export function renewIntervalMs(leaseTtlMs: number): number {
  return Math.max(50, Math.floor(leaseTtlMs / 4));
}

/** The local monotonic clock the fence measures with. */
export const monotonicNow = (): number => performance.now();

export class SelfFence {
  readonly #afterMs: number;
  readonly #onFence: () => void;
  #deadline: number;
  #timer: NodeJS.Timeout | undefined;
  #fired = false;

  /** `sentAt`: when the command that set the lease was sent (monotonicNow()). */
  constructor(leaseTtlMs: number, sentAt: number, onFence: () => void) {
    this.#afterMs = leaseTtlMs - selfFenceMarginMs(leaseTtlMs);
    this.#onFence = onFence;
    this.#deadline = sentAt + this.#afterMs;
    this.#arm();
  }

  /** The fence fired: the holder stopped its agent and writes nothing more. */
  get fired(): boolean {
    return this.#fired;
  }

  /** A renewal sent at `sentAt` landed: the deadline moves to sentAt + ttl - margin (never back). */
  renewed(sentAt: number): void {
    if (this.#fired) return;
    const deadline = sentAt + this.#afterMs;
    if (deadline <= this.#deadline) return;
    this.#deadline = deadline;
    this.#arm();
  }

  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #arm(): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#check(), Math.max(0, this.#deadline - monotonicNow()));
  }

  #check(): void {
    // A timer may fire a little early on some platforms: look at the clock, not at the timer.
    const left = this.#deadline - monotonicNow();
    if (left > 0) {
      this.#timer = setTimeout(() => this.#check(), Math.ceil(left));
      return;
    }
    this.#timer = undefined;
    this.#fired = true;
    this.#onFence();
  }
}
