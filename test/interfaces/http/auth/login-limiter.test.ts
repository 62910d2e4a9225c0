import { describe, expect, it } from 'vitest';
import { LOGIN_BURST, LOGIN_REFILL_MS, LoginLimiter } from '../../../../src/interfaces/http/auth/login-limiter.ts';

describe('LoginLimiter', () => {
  it('allows LOGIN_BURST failures, then refuses with the seconds until the next one; refills one per LOGIN_REFILL_MS', () => {
    const limiter = new LoginLimiter();
    const t0 = 1_000_000;
    for (let i = 0; i < LOGIN_BURST; i++) {
      expect(limiter.check('10.0.0.1', t0)).toEqual({ ok: true });
      limiter.failed('10.0.0.1', t0);
    }
    expect(limiter.check('10.0.0.1', t0)).toEqual({ ok: false, retryAfterS: LOGIN_REFILL_MS / 1000 });
    expect(limiter.check('10.0.0.2', t0)).toEqual({ ok: true }); // another address is not touched
    expect(limiter.check('10.0.0.1', t0 + LOGIN_REFILL_MS - 1000)).toEqual({ ok: false, retryAfterS: 1 });
    expect(limiter.check('10.0.0.1', t0 + LOGIN_REFILL_MS)).toEqual({ ok: true });
    limiter.failed('10.0.0.1', t0 + LOGIN_REFILL_MS);
    expect(limiter.check('10.0.0.1', t0 + LOGIN_REFILL_MS).ok).toBe(false);
  });

  it('remembers at most maxClients addresses: a flood of addresses evicts the least recently seen, memory stays bounded', () => {
    const limiter = new LoginLimiter({ maxClients: 100 });
    for (let i = 0; i < 10_000; i++) limiter.failed(`10.1.${i >> 8}.${i & 255}`, 0);
    expect(limiter.size).toBe(100);
  });
});
