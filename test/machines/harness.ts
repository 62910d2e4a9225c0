import { afterEach, beforeEach, vi } from 'vitest';
import type { SessionActor } from '../../machines/restore.ts';
import { parseRetryPolicy, type RetryPolicy } from '../../src/retry/index.ts';

/** A valid retry policy without jitter (initial 1 s, ×2, at most 60 s), with `patch` over it. */
export function policy(patch: Record<string, unknown> = {}): RetryPolicy {
  const result = parseRetryPolicy({
    jitter: 'none',
    initialDelayMs: 1000,
    multiplier: 2,
    maxDelayMs: 60_000,
    ...patch,
  });
  if (!result.ok) throw new Error(JSON.stringify(result.errors));
  return result.policy;
}

/** Lets every pending promise and async generator step run (timers stay fake). */
export async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
  await vi.advanceTimersByTimeAsync(0);
  for (let i = 0; i < 20; i++) await Promise.resolve();
}

export const state = (actor: SessionActor) => actor.getSnapshot().value;
export const ctx = (actor: SessionActor) => actor.getSnapshot().context;

/** Fake timers and clock (2026-01-01) around every test of the file that calls it. */
export function useFakeClock(): void {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    vi.setSystemTime(new Date('2026-01-01T00:00:00Z'));
  });
  afterEach(() => {
    vi.useRealTimers();
  });
}
