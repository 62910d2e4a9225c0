import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { IdleTimer } from '../../src/process/idle-timer.ts';

describe('IdleTimer', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('fires once after a full quiet period', () => {
    const onIdle = vi.fn();
    const timer = new IdleTimer(1000, onIdle);
    timer.resume();
    vi.advanceTimersByTime(999);
    expect(onIdle).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(onIdle).toHaveBeenCalledTimes(1);
    timer.resume();
    vi.advanceTimersByTime(5000);
    expect(onIdle).toHaveBeenCalledTimes(1);
  });

  it('restarts the period on every resume', () => {
    const onIdle = vi.fn();
    const timer = new IdleTimer(1000, onIdle);
    for (let i = 0; i < 10; i += 1) {
      timer.resume();
      vi.advanceTimersByTime(900);
    }
    expect(onIdle).not.toHaveBeenCalled();
  });

  it('does not count while paused, nor after cancel', () => {
    const onIdle = vi.fn();
    const timer = new IdleTimer(1000, onIdle);
    timer.resume();
    timer.pause();
    vi.advanceTimersByTime(5000);
    expect(onIdle).not.toHaveBeenCalled();
    timer.resume();
    timer.cancel();
    timer.resume();
    vi.advanceTimersByTime(5000);
    expect(onIdle).not.toHaveBeenCalled();
  });
});
