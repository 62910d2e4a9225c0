import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { afterAll, describe, expect, it } from 'vitest';
import { InputError } from '../../src/errors.ts';
import { counterTotals } from '../../src/runtime/counters.ts';
import { deploymentPolicy } from '../../src/runtime/deployment-policy.ts';
import { internals } from '../../src/runtime/internals.ts';
import { FAKE_API_KEY, type PiEnv } from '../support/pi-env.ts';
import { hasToolResult, type FakeModelServer, type Script } from '../support/fake-model-server.ts';
import { turnEnded, until, useRuntimeSuite, type Harness } from '../support/runtime.ts';

/**
 * The worker's egress (on by default): a pi session's tool reaches the host the deployment policy
 * lists and is refused elsewhere; each refusal is an audit log line of the worker (host, port,
 * session, turn, attempt) and counts in the fleet counters; the model still gets its key, through
 * the bridge. A caller cannot widen any of it.
 */

let allowed: { server: Server; port: number } | undefined;
let denied: { server: Server; port: number; hits: number } | undefined;

async function listen(address: string): Promise<{ server: Server; port: number; hits: number }> {
  const state = { hits: 0 } as { server: Server; port: number; hits: number };
  state.server = createServer((_req, res) => {
    state.hits += 1;
    res.end('allowed-host-answer');
  });
  await new Promise<void>((r) => state.server.listen(0, address, r));
  state.port = (state.server.address() as AddressInfo).port;
  return state;
}

const probe = (): string =>
  `curl -sS --max-time 10 http://127.0.0.2:${allowed?.port ?? 0}/ok; echo; curl -sS --max-time 10 -o /dev/null -w 'denied:%{http_code}' http://127.0.0.3:${denied?.port ?? 0}/x`;

const SCRIPTS: Record<string, Script> = {
  'egress-probe': ({ body }) =>
    hasToolResult(body) ? { text: 'Probed.' } : { toolCalls: [{ name: 'bash', arguments: { command: probe() } }] },
};

let server: FakeModelServer;
let env: PiEnv;
let h: Harness;

useRuntimeSuite('egress', { scripts: SCRIPTS }, async (s) => {
  ({ server, env, h } = s);
  [allowed, denied] = await Promise.all([listen('127.0.0.2'), listen('127.0.0.3')]);
});
afterAll(() => {
  allowed?.server.close();
  denied?.server.close();
});

describe('egress of the durable runtime', () => {
  it('a tool reaches the host policy.network.allow lists; another host is refused, audited and counted; the model gets its key', async () => {
    const logged: Array<{ message: string; fields: Record<string, unknown> }> = [];
    await h.startWorker({
      policy: deploymentPolicy({
        workspace: tmpdir(),
        policy: { network: { allow: [`127.0.0.2:${allowed?.port ?? 0}`] } },
      }),
      log: (_level, message, fields) => logged.push({ message, fields: fields ?? {} }),
    });
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Probe the network',
      options: { provider: 'fake', model: 'egress-probe', cwd: env.cwd },
    });
    const view = await turnEnded(h.runtime, sessionId);
    expect(view.state).toBe('completed');
    const requests = server.requestsFor('egress-probe');
    expect(requests.length).toBe(2);
    // through the model bridge, with the key of pi's models.json
    for (const r of requests) expect(r.headers.authorization).toBe(`Bearer ${FAKE_API_KEY}`);
    const toolResult = JSON.stringify(requests[1]?.body.messages?.find((m) => m.role === 'tool')?.content);
    expect(toolResult).toContain('allowed-host-answer');
    expect(toolResult).toContain('denied:403');
    expect(denied?.hits).toBe(0);
    const audit = logged.filter((l) => l.message === 'audit');
    expect(audit).toEqual([
      {
        message: 'audit',
        fields: {
          audit: true,
          action: 'egress.refused',
          host: '127.0.0.3',
          port: denied?.port,
          method: 'GET',
          reason: 'not allowed',
          sessionId,
          turn: 1,
          attempt: 1,
        },
      },
    ]);
    const totals = await until(async () => {
      const t = await counterTotals(internals(h.runtime).redis, internals(h.runtime).keys);
      return t.get('egress|not allowed') === 1 ? t : null;
    }, 10_000);
    expect(totals.get('egress|not allowed')).toBe(1);
  });

  it('a caller cannot widen the network: no option names hosts, proxies or the agent environment', async () => {
    for (const options of [
      { network: { allow: ['evil.example'] } },
      { allow: ['evil.example'] },
      { env: { HTTPS_PROXY: '', NO_PROXY: '*' } },
      { egress: false },
    ]) {
      const error = await h.runtime.enqueue({ prompt: 'hi', options }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(error, JSON.stringify(options)).toBeInstanceOf(InputError);
    }
  });
});
