import { describe, expect, it } from 'vitest';
import type { RunningServer } from '../../../src/interfaces/http/server.ts';
import { internals } from '../../../src/runtime/internals.ts';
import { outboxKey, webhookFleetKeys } from '../../../src/runtime/webhooks/outbox-keys.ts';
import type { DeadLetter } from '../../../src/runtime/webhooks/outbox.ts';
import { httpConfig, postJson, serveApi } from '../../support/http.ts';
import { useRuntimeSuite, type Harness } from '../../support/runtime.ts';

/**
 * The webhook routes over the real HTTP server and a real Redis: the dead letters (with `since`), a replay
 * that puts them back in their sessions' outboxes, and the sessions with events waiting. The dead letters are
 * written as the deliverer writes them (outbox.ts); their delivery is test/runtime/webhooks/delivery.test.ts's.
 */

const TOKEN = 'admin-token-0123456789abcdef';
let h: Harness;
useRuntimeSuite('http-webhooks', {}, (s) => {
  ({ h } = s);
});

function letter(seq: number, deadAt: string): DeadLetter {
  const id = `msg_${String(seq).padStart(24, '0')}`;
  const body = JSON.stringify({ type: 'turn.ended', id, sessionId: `s-${seq}`, turn: 1, at: deadAt, seq: 3 });
  return { seq, deadAt, sessionId: `s-${seq}`, id, type: 'turn.ended', attempts: 9, lastError: 'HTTP 503', body };
}

async function get(api: RunningServer, path: string): Promise<{ status: number; body: unknown }> {
  const r = await fetch(`${api.url}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  return { status: r.status, body: await r.json() };
}

describe('webhook routes', () => {
  it('lists dead letters (from a number or a time), refuses a bad since naming it, and replays them into their outboxes', async () => {
    const { redis, keys } = internals(h.runtime);
    const fleet = webhookFleetKeys(keys);
    const letters = [letter(1, '2026-12-01T10:00:00.000Z'), letter(2, '2026-12-02T10:00:00.000Z')];
    // Newest first, as the deliverer pushes them.
    for (const d of letters) await redis.lpush(fleet.dead, JSON.stringify(d));
    const api = await serveApi(h.runtime, httpConfig(h.prefix, { token: TOKEN }));
    try {
      expect(await get(api, '/api/webhooks/dead')).toEqual({ status: 200, body: letters });
      expect((await get(api, '/api/webhooks/dead?since=2')).body).toEqual([letters[1]]);
      expect((await get(api, '/api/webhooks/dead?since=2026-12-01T12:00:00Z')).body).toEqual([letters[1]]);
      const bad = await get(api, '/api/webhooks/dead?since=yesterday');
      expect(bad.status).toBe(400);
      expect(bad.body).toMatchObject({ issues: [{ field: 'since', message: expect.stringContaining('yesterday') }] });
      expect((await postJson(api, '/api/webhooks/replay', TOKEN, { since: 'soon' })).status).toBe(400);
      expect((await postJson(api, '/api/webhooks/replay', TOKEN, {})).status).toBe(400);
      expect(await get(api, '/api/webhooks/pending')).toEqual({ status: 200, body: [] });

      expect(await postJson(api, '/api/webhooks/replay', TOKEN, { since: '2' })).toEqual({
        status: 200,
        body: { replayed: 1 },
      });
      expect((await get(api, '/api/webhooks/dead')).body).toEqual([letters[0]]);
      // Back in its session's outbox, same webhook-id and body, due now.
      expect(await redis.hget(outboxKey(keys, 's-2', 'outbox'), letters[1]?.id ?? '')).toBe(letters[1]?.body);
      expect((await get(api, '/api/webhooks/pending')).body).toEqual([
        { sessionId: 's-2', waiting: 1, nextAt: expect.any(Number) },
      ]);
    } finally {
      await api.close(500);
    }
  });
});
