import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { RunningServer } from '../../../src/interfaces/http/server.ts';
import { internals } from '../../../src/runtime/internals.ts';
import type { Runtime } from '../../../src/runtime/runtime.ts';
import { DEFAULT_TEXT, type FakeModelServer } from '../../support/fake-model-server.ts';
import { httpConfig, postJson, serveApi } from '../../support/http.ts';
import { httpPi, rules, runtimeWith } from '../../support/limits.ts';
import type { PiEnv } from '../../support/pi-env.ts';
import { turnEnded, until, useRuntimeSuite, type Harness } from '../../support/runtime.ts';

/**
 * Tenants and priorities come from credentials, not from requests (issue 25, finding 5), over the
 * real HTTP server, a real Redis and a real worker: an omitted tenant is the token's, so a
 * `{"tenant":"*"}` limit applies; a request naming another tenant or a priority above the token's
 * is a 400 naming the field, with nothing written.
 */

const sha = (t: string) => createHash('sha256').update(t).digest('hex');
const ACME = 'acme-token-0123456789abcdef';
const PLAIN = 'plain-token-0123456789abcdef';
const MODEL = 'tenants-model';
const TOKENS = [
  { name: 'acme-bot', scope: 'write', sha256: sha(ACME), tenant: 'acme', maxPriority: 10 },
  { name: 'plain-bot', scope: 'write', sha256: sha(PLAIN) },
];

let h: Harness;
let env: PiEnv;
let server: FakeModelServer;
useRuntimeSuite('http-tenants', { scripts: { [MODEL]: { text: DEFAULT_TEXT } } }, (s) => {
  ({ h, env, server } = s);
});

function serve(runtime: Runtime = h.runtime): Promise<RunningServer> {
  return serveApi(runtime, httpConfig(h.prefix, { tokens: TOKENS }));
}

const post = postJson;

const tenantOf = (id: string) => internals(h.runtime).redis.hget(internals(h.runtime).store.key(id, 'meta'), 'tenant');

describe('the tenant is the credential’s', () => {
  it('an omitted tenant is the token’s (its name when it names none); naming its own is fine; another is 400 naming tenant, nothing written', async () => {
    const api = await serve();
    try {
      const omitted = await post(api, '/api/sessions', ACME, { prompt: 'hi' });
      expect(omitted.status).toBe(201);
      expect(await tenantOf(omitted.body.sessionId as string)).toBe('acme');
      const own = await post(api, '/api/sessions', ACME, { prompt: 'hi', tenant: 'acme' });
      expect(own.status).toBe(201);
      const plain = await post(api, '/api/sessions', PLAIN, { prompt: 'hi' });
      expect(await tenantOf(plain.body.sessionId as string)).toBe('plain-bot');

      const before = await h.runtime.listPage({ limit: 1000 });
      const other = await post(api, '/api/sessions', ACME, {
        prompt: 'hi',
        tenant: 'globex',
        sessionId: 'claimed-globex',
      });
      expect(other.status).toBe(400);
      expect(other.body).toMatchObject({ issues: [{ field: 'tenant', message: expect.stringMatching(/acme/) }] });
      expect(await h.runtime.getSession('claimed-globex')).toBeNull();
      expect((await h.runtime.listPage({ limit: 1000 })).sessions).toHaveLength(before.sessions.length);
    } finally {
      await api.close(500);
    }
  });

  it('a priority above the token’s maxPriority is 400 naming priority (new session and added prompt); at or below it is fine', async () => {
    const api = await serve();
    try {
      const high = await post(api, '/api/sessions', ACME, { prompt: 'hi', priority: 1000, sessionId: 'too-high' });
      expect(high.status).toBe(400);
      expect(high.body).toMatchObject({
        issues: [{ field: 'priority', message: expect.stringMatching(/at most 10/) }],
      });
      expect(await h.runtime.getSession('too-high')).toBeNull();
      const ok = await post(api, '/api/sessions', ACME, { prompt: 'hi', priority: 10 });
      expect(ok.status).toBe(201);
      const prompt = await post(api, `/api/sessions/${ok.body.sessionId as string}/prompts`, ACME, {
        prompt: 'more',
        priority: 1000,
      });
      expect(prompt.status).toBe(400);
      expect(prompt.body).toMatchObject({ issues: [{ field: 'priority' }] });
      // A token that names no maxPriority: 0, the default priority.
      expect((await post(api, '/api/sessions', PLAIN, { prompt: 'hi', priority: 1 })).status).toBe(400);
      expect((await post(api, '/api/sessions', PLAIN, { prompt: 'hi', priority: -5 })).status).toBe(201);
    } finally {
      await api.close(500);
    }
  });

  it('so a {"tenant":"*"} limit applies to a request that names no tenant: paused, its session waits under it; resumed, it runs', async () => {
    const fleetLimits = rules([{ match: { tenant: '*' }, maxConcurrent: 1 }]);
    const rt = runtimeWith(h, fleetLimits);
    const worker = await h.startWorker({
      concurrency: 2,
      agentOptions: { pi: httpPi(env, h, server.url) },
      fleetLimits,
      limitPollMs: 500,
    });
    const api = await serve(rt);
    try {
      await rt.pauseDispatch('tenant=*');
      const created = await post(api, '/api/sessions', ACME, {
        prompt: 'limited',
        options: { provider: 'fake', model: MODEL, cwd: env.cwd },
      });
      expect(created.status).toBe(201);
      const id = created.body.sessionId as string;
      const waiting = await until(
        async () => {
          const s = await rt.getSession(id);
          return s?.state === 'waiting' && s.context?.waitingFor != null ? s : null;
        },
        30_000,
        'the session to wait under tenant=*',
      );
      expect(waiting.context?.waitingFor).toMatchObject({ limit: 'tenant=*', reason: 'paused' });
      await rt.resumeDispatch('tenant=*');
      expect((await turnEnded(rt, id, 1, 60_000)).state).toBe('completed');
    } finally {
      await api.close(500);
      await worker.close(2000);
      await rt.close();
    }
  }, 120_000);
});
