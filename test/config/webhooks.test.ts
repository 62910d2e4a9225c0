import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { WEBHOOK_DELIVERY_DEFAULTS } from '../../src/config/webhooks.ts';

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

describe('webhooks configuration', () => {
  it('reads SESSIOND_WEBHOOKS (JSON) with one secret or several, and the delivery defaults', () => {
    const hooks = [
      { url: 'https://hooks.example.com/a', secret: SECRET, events: ['turn.ended'] },
      {
        url: 'http://127.0.0.1:9/b',
        secret: [SECRET, SECRET],
        events: ['turn.started', 'session.parked', 'session.deleted'],
      },
    ];
    const config = loadConfig({}, { SESSIOND_WEBHOOKS: JSON.stringify(hooks) });
    expect(config.webhooks).toEqual(hooks);
    expect(config.webhookDelivery).toMatchObject({
      maxAgeMs: WEBHOOK_DELIVERY_DEFAULTS.maxAgeMs,
      timeoutMs: WEBHOOK_DELIVERY_DEFAULTS.timeoutMs,
      allowAddresses: [],
    });
    expect(loadConfig({}, {}).webhooks).toEqual([]);
  });

  it.each([
    [
      [{ url: 'ftp://x', secret: SECRET, events: ['turn.ended'] }],
      'webhooks.0.url: must be an http:// or https:// URL',
    ],
    [[{ url: 'https://x', secret: 'plain', events: ['turn.ended'] }], 'webhooks.0.secret'],
    [[{ url: 'https://x', secret: SECRET, events: ['turn.lost'] }], 'webhooks.0.events.0'],
    [[{ url: 'https://x', secret: SECRET, events: ['turn.ended', 'session.removed'] }], 'webhooks.0.events.1'],
    [[{ url: 'https://x', secret: SECRET, events: [] }], 'webhooks.0.events: must name at least one event'],
    [[{ url: 'https://x', secret: SECRET, events: ['turn.ended'], extra: 1 }], 'webhooks.0'],
  ])('refuses %j naming the field', (hooks, message) => {
    expect(() => loadConfig({}, { SESSIOND_WEBHOOKS: JSON.stringify(hooks) })).toThrow(message);
  });

  it('refuses an allowed address that is not an address or a CIDR block, naming the field', () => {
    expect(() =>
      loadConfig({}, { SESSIOND_WEBHOOK_DELIVERY: JSON.stringify({ allowAddresses: ['localhost'] }) }),
    ).toThrow('webhookDelivery.allowAddresses.0: must be an IP address or a CIDR block');
    const ok = loadConfig({}, { SESSIOND_WEBHOOK_DELIVERY: '{"allowAddresses":["127.0.0.1","10.0.0.0/8"]}' });
    expect(ok.webhookDelivery.allowAddresses).toEqual(['127.0.0.1', '10.0.0.0/8']);
  });
});
