import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { monotonicNow, renewIntervalMs, SelfFence, selfFenceMarginMs } from '../../src/runtime/self-fence.ts';

/** The self-fence's arithmetic on a faked clock (timers and performance.now() together). */
describe('self-fencing of a lease holder', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('keeps a tenth of the TTL (at least 200 ms, at most half) and renews four times per TTL', () => {
    expect(selfFenceMarginMs(2000)).toBe(200);
    expect(selfFenceMarginMs(30_000)).toBe(3000);
    expect(selfFenceMarginMs(1000)).toBe(200);
    expect(selfFenceMarginMs(300)).toBe(150);
    expect(renewIntervalMs(2000)).toBe(500);
    expect(renewIntervalMs(30_000)).toBe(7500);
  });

  it('fires at send time + TTL - margin when no renewal lands, and not before', () => {
    const fired = vi.fn();
    const fence = new SelfFence(2000, monotonicNow(), fired);
    vi.advanceTimersByTime(1799);
    expect(fired).not.toHaveBeenCalled();
    expect(fence.fired).toBe(false);
    vi.advanceTimersByTime(1);
    expect(fired).toHaveBeenCalledOnce();
    expect(fence.fired).toBe(true);
  });

  it('counts from when a renewal was sent, not from when its answer came', () => {
    const fired = vi.fn();
    const fence = new SelfFence(2000, monotonicNow(), fired);
    vi.advanceTimersByTime(500);
    const sentAt = monotonicNow();
    // The answer arrives 1 s later: the deadline is sentAt + 1800, not now + 1800.
    vi.advanceTimersByTime(1000);
    fence.renewed(sentAt);
    vi.advanceTimersByTime(799);
    expect(fired).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(fired).toHaveBeenCalledOnce();
  });

  it('never moves the deadline back (a late answer to an older renewal), and does nothing once fired or stopped', () => {
    const fired = vi.fn();
    const fence = new SelfFence(2000, monotonicNow(), fired);
    const early = monotonicNow();
    vi.advanceTimersByTime(1000);
    fence.renewed(monotonicNow());
    fence.renewed(early);
    vi.advanceTimersByTime(1799);
    expect(fired).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(fired).toHaveBeenCalledOnce();
    fence.renewed(monotonicNow());
    vi.advanceTimersByTime(5000);
    expect(fired).toHaveBeenCalledOnce();

    const other = vi.fn();
    const stopped = new SelfFence(2000, monotonicNow(), other);
    stopped.stop();
    vi.advanceTimersByTime(5000);
    expect(other).not.toHaveBeenCalled();
  });
});
