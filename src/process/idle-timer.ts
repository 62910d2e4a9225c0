/**
 * Fires `onIdle` once when it has been running for `ms` without a pause.
 * `resume()` restarts the full period; `pause()` and `cancel()` stop the clock.
 */
export class IdleTimer {
  private timer: NodeJS.Timeout | undefined;
  private done = false;

  constructor(
    private readonly ms: number,
    private readonly onIdle: () => void,
  ) {}

  resume(): void {
    if (this.done) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.done = true;
      this.onIdle();
    }, this.ms);
  }

  pause(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  cancel(): void {
    this.pause();
    this.done = true;
  }
}
