import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { allowList, webhookDestination } from '../../../src/runtime/webhooks/destination.ts';
import { signatureHeader } from '../../../src/runtime/webhooks/sign.ts';

describe('webhook destinations', () => {
  it.each([
    '127.0.0.1',
    '10.1.2.3',
    '172.20.0.1',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '::1',
    'fd00::1',
    '::ffff:127.0.0.1',
    '0.0.0.0',
  ])('refuses %s unless it is listed', async (address) => {
    const refused = await webhookDestination(address, allowList([]));
    expect(refused.ok).toBe(false);
    if (!refused.ok) expect(refused.reason).toContain('loopback, link-local or private');
    const block = address.includes(':')
      ? address.startsWith('::ffff:')
        ? '127.0.0.0/8'
        : `${address}/128`
      : `${address}/32`;
    expect((await webhookDestination(address, allowList([block]))).ok).toBe(true);
  });

  it('lets a public address through', async () => {
    expect(await webhookDestination('93.184.215.14', allowList([]))).toEqual({
      ok: true,
      address: '93.184.215.14',
      family: 4,
    });
  });

  it('refuses a name that resolves to loopback', async () => {
    const r = await webhookDestination('localhost', allowList([]));
    expect(r.ok).toBe(false);
  });
});

describe('webhook signatures', () => {
  it('signs "id.timestamp.body" with each secret, per the Standard Webhooks example', () => {
    // The specification's example: secret, id, timestamp, body and the signature it gives.
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    const id = 'msg_p5jXN8AQM9LWM0D4loKWxJek';
    const body = '{"test": 2432232314}';
    const header = signatureHeader([secret], id, 1614265330, body);
    expect(header).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
    const key = Buffer.from('c2VjcmV0c2VjcmV0c2VjcmV0', 'base64');
    const two = signatureHeader([secret, 'whsec_c2VjcmV0c2VjcmV0c2VjcmV0'], id, 1614265330, body).split(' ');
    expect(two).toHaveLength(2);
    expect(two[1]).toBe(`v1,${createHmac('sha256', key).update(`${id}.1614265330.${body}`).digest('base64')}`);
  });
});
