import { tmpdir } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { clientOver } from '../../../src/api/bind.ts';
import { loadConfig } from '../../../src/config/config.ts';
import { InputError } from '../../../src/errors.ts';
import { startServer } from '../../../src/interfaces/http/server.ts';
import { deploymentPolicy } from '../../../src/runtime/deployment-policy.ts';
import { internals } from '../../../src/runtime/internals.ts';
import type { SessionRecord } from '../../../src/runtime/caller/types.ts';
import { summarize } from '../../../src/runtime/inspect.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import { outboxKey } from '../../../src/runtime/webhooks/outbox-keys.ts';
import { runCli } from '../../support/cli.ts';
import { freePort } from '../../support/redis.ts';
import { BACKENDS, turnEnded, until, type Harness, useRuntimeSuite } from '../../support/runtime.ts';
import type { PiEnv } from '../../support/pi-env.ts';
import { validSignatures, WebhookReceiver } from '../../support/webhook-receiver.ts';
import {
  killAllWorkerProcesses,
  startWorkerProcess,
  workerEnv,
  type WorkerProcessOptions,
} from '../../support/worker-process.ts';

/**
 * Per-session webhooks (`webhook` of enqueue) end to end: real `sessiond worker` processes with no operator webhooks
 * (SESSIOND_WEBHOOKS unset), real Redis, real pi against the fake model, real HTTP receivers on 127.0.0.1. Signatures
 * are checked here with node:crypto as the Standard Webhooks specification says, with the secret enqueue returned.
 */

const MODEL = 'session-webhooks-text';
/** A turn that takes a while: the next prompt arrives while it runs. */
const SLOW = 'session-webhooks-slow';

let env: PiEnv;
let h: Harness;
let redisUrl: string;

/** A worker with the deployment policy `hosts` for sessions' webhooks, and no webhooks of the operator. */
function worker(hosts: string[]): WorkerProcessOptions {
  return {
    redisUrl,
    prefix: h.prefix,
    env,
    stateDir: h.stateDir,
    leaseTtl: '2s',
    stalledInterval: '1s',
    extraEnv: {
      SESSIOND_POLICY: JSON.stringify({ webhooks: { hosts } }),
      SESSIOND_WEBHOOK_DELIVERY: JSON.stringify({
        allowAddresses: ['127.0.0.1'],
        retryBaseMs: 100,
        retryMaxMs: 400,
        pollMs: 100,
        timeoutMs: 2000,
      }),
    },
  };
}

function runtimeAllowing(hosts: string[]): Runtime {
  return new Runtime({
    connect: h.connect,
    prefix: h.prefix,
    policy: deploymentPolicy({ workspace: tmpdir(), policy: { webhooks: { hosts } } }),
  });
}

describe.each(BACKENDS)('per-session webhooks on %s Redis', (backend) => {
  useRuntimeSuite(
    `session-webhooks-${backend}`,
    {
      backend,
      scripts: {
        [MODEL]: [{ text: ['Hello', ' from', ' a', ' session', ' webhook'] }],
        [SLOW]: [{ delayMs: 1500, text: ['Slowly', ' said'] }],
      },
      cleanup: () => killAllWorkerProcesses(),
    },
    (s) => {
      ({ env, h } = s);
      redisUrl = s.redis.url;
    },
  );
  afterEach(() => killAllWorkerProcesses());

  it("each session's webhook gets that session's events only, signed with the secret its enqueue returned, session.deleted included", async () => {
    const [a, b] = [new WebhookReceiver(await freePort()), new WebhookReceiver(await freePort())];
    await Promise.all([a.listen(), b.listen()]);
    const hosts = [`127.0.0.1:${a.port}`, `127.0.0.1:${b.port}`];
    await startWorkerProcess(worker(hosts));
    const runtime = runtimeAllowing(hosts);
    try {
      const options = { provider: 'fake', model: MODEL, cwd: env.cwd };
      const first = await runtime.enqueue({ prompt: 'hello a', options, webhook: a.url });
      const second = await runtime.enqueue({ prompt: 'hello b', options, webhook: b.url });
      // A session without a webhook: nothing of it goes anywhere.
      const plain = await runtime.enqueue({ prompt: 'hello plain', options });
      expect(first.webhookSecret).toMatch(/^whsec_[A-Za-z0-9+/]+={0,2}$/);
      expect(second.webhookSecret).toMatch(/^whsec_/);
      expect(first.webhookSecret).not.toBe(second.webhookSecret);
      expect(plain.webhookSecret).toBeUndefined();
      for (const id of [first.sessionId, second.sessionId, plain.sessionId])
        expect((await turnEnded(runtime, id)).state).toBe('completed');

      // inspect shows the URL, never the secret.
      const view = summarize((await runtime.getSession(first.sessionId))!);
      expect(view.webhook).toBe(a.url);
      expect(JSON.stringify(view)).not.toContain(first.webhookSecret);
      expect(summarize((await runtime.getSession(plain.sessionId))!).webhook).toBeUndefined();

      await until(
        async () => (await runtime.getSession(first.sessionId))?.heldBy == null,
        30_000,
        'the worker lets go',
      );
      expect(await runtime.deleteSession(first.sessionId, { actor: 'app:test' })).toMatchObject({ deleted: true });
      await until(
        async () => a.events().some((e) => e.type === 'session.deleted'),
        30_000,
        'session.deleted reaches the webhook',
      );
      await until(async () => b.events().some((e) => e.type === 'turn.ended'), 30_000, "b's turn.ended");

      expect(a.events().map((e) => [e.type, e.sessionId, e.turn])).toEqual([
        ['turn.started', first.sessionId, 1],
        ['turn.ended', first.sessionId, 1],
        ['session.deleted', first.sessionId, 1],
      ]);
      expect(a.events().find((e) => e.type === 'turn.ended')).toMatchObject({ status: 'completed' });
      expect(a.events().find((e) => e.type === 'session.deleted')).toMatchObject({
        reason: 'deleted',
        actor: 'app:test',
      });
      expect(b.events().map((e) => [e.type, e.sessionId])).toEqual([
        ['turn.started', second.sessionId],
        ['turn.ended', second.sessionId],
      ]);
      for (const r of a.requests) expect(validSignatures(r, [first.webhookSecret ?? ''])).toBe(1);
      for (const r of b.requests) expect(validSignatures(r, [second.webhookSecret ?? ''])).toBe(1);
      // Not signed with the other session's secret: each endpoint has its own.
      expect(a.requests.some((r) => validSignatures(r, [second.webhookSecret ?? '']) > 0)).toBe(false);
      // The session without a webhook recorded no events (no operator webhooks on this deployment).
      expect(
        await h.connect('session-webhooks-check').exists(outboxKey(internals(runtime).keys, plain.sessionId, 'outbox')),
      ).toBe(0);
    } finally {
      await runtime.close();
      await Promise.all([a.close(), b.close()]);
    }
  }, 180_000);

  it("a turn run straight from the mailbox after another: both turns' events reach the webhook, and inspect's history has both prompts", async () => {
    const receiver = new WebhookReceiver(await freePort());
    await receiver.listen();
    const hosts = [`127.0.0.1:${receiver.port}`];
    await startWorkerProcess(worker(hosts));
    const runtime = runtimeAllowing(hosts);
    try {
      const options = { provider: 'fake', model: SLOW, cwd: env.cwd };
      const { sessionId } = await runtime.enqueue({ prompt: 'first prompt', options, webhook: receiver.url });
      await until(async () => (await runtime.getSession(sessionId))?.state === 'running', 30_000, 'turn 1 running');
      await runtime.enqueue({ sessionId, prompt: 'second prompt', options });
      expect((await turnEnded(runtime, sessionId, 2)).state).toBe('completed');
      const session = await runtime.getSession(sessionId);
      // The holder took the second prompt while the first turn ran: the session went on running.
      expect(session?.history.filter((t) => t.from === 'completed' && t.to === 'running')).toHaveLength(1);
      await expectTwoTurns(receiver, session!, ['first prompt', 'second prompt']);
    } finally {
      await runtime.close();
      await receiver.close();
    }
  }, 180_000);

  it('a worker kill -9ed while the turn ran, the next prompt waiting, no retry left: the restoring worker fails the turn and starts the next; every event arrives, every prompt is in the history', async () => {
    const receiver = new WebhookReceiver(await freePort());
    await receiver.listen();
    const hosts = [`127.0.0.1:${receiver.port}`];
    const first = await startWorkerProcess(worker(hosts));
    const runtime = runtimeAllowing(hosts);
    try {
      const options = { provider: 'fake', model: SLOW, cwd: env.cwd };
      const { sessionId } = await runtime.enqueue({
        prompt: 'slow prompt',
        options,
        retryPolicy: { maxAttempts: 1 },
        webhook: receiver.url,
      });
      await until(async () => (await runtime.getSession(sessionId))?.state === 'running', 30_000, 'turn 1 running');
      await runtime.enqueue({ sessionId, prompt: 'next prompt', options });
      // The holder has put it in the machine's mailbox, and that is stored: the restore finds it there.
      await until(
        async () => (await runtime.getSession(sessionId))?.context?.mailbox.length === 1,
        30_000,
        'the second prompt in the stored mailbox',
      );
      first.kill('SIGKILL');
      await first.exited;
      await startWorkerProcess(worker(hosts));
      expect((await turnEnded(runtime, sessionId, 2)).state).toBe('completed');
      const session = await runtime.getSession(sessionId);
      expect(session?.history.some((t) => t.from === 'interrupted' && t.to === 'failed')).toBe(true);
      await expectTwoTurns(receiver, session!, ['slow prompt', 'next prompt']);
      expect(receiver.events().find((e) => e.type === 'turn.ended' && e.turn === 1)).toMatchObject({
        status: 'failed',
      });
    } finally {
      await runtime.close();
      await receiver.close();
    }
  }, 180_000);

  it('a host the deployment policy does not list is refused naming webhook, with nothing written; the default policy lists none', async () => {
    const port = await freePort();
    const runtime = runtimeAllowing([`127.0.0.1:${port}`]);
    try {
      const options = { provider: 'fake', model: MODEL, cwd: env.cwd };
      const keys = internals(runtime).keys;
      const redis = h.connect('session-webhooks-refused');
      const refused = async (r: Runtime, webhook: string, sessionId: string): Promise<InputError> => {
        const error = await r.enqueue({ sessionId, prompt: 'hello', options, webhook }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(InputError);
        expect(await redis.exists(keys.session(sessionId, 'meta'), outboxKey(keys, sessionId, 'target'))).toBe(0);
        return error as InputError;
      };
      const other = await refused(runtime, `http://127.0.0.1:${port + 1}/hook`, 'wh-refused-1');
      expect(other.issues).toEqual([
        {
          field: 'webhook',
          message: `127.0.0.1:${port + 1} is not a host this deployment lets callers send webhooks to (policy.webhooks.hosts: 127.0.0.1:${port})`,
        },
      ]);
      expect((await refused(runtime, 'ftp://127.0.0.1/hook', 'wh-refused-2')).issues).toEqual([
        { field: 'webhook', message: 'must be an http:// or https:// URL' },
      ]);
      // The harness's runtime runs the default policy: no host at all.
      const none = await refused(h.runtime, `http://127.0.0.1:${port}/hook`, 'wh-refused-3');
      expect(none.issues[0]?.message).toContain('(policy.webhooks.hosts: none)');
      // On an existing session too: the prompt is not stored, its webhook not set.
      const { sessionId } = await runtime.enqueue({ prompt: 'hello', options });
      const before = await redis.hgetall(keys.session(sessionId, 'meta'));
      const error = await runtime
        .enqueue({ sessionId, prompt: 'again', webhook: 'https://elsewhere.example.com/' })
        .catch((e: unknown) => e);
      expect((error as InputError).issues.map((i) => i.field)).toEqual(['webhook']);
      expect(await redis.hgetall(keys.session(sessionId, 'meta'))).toEqual(before);
      expect(await redis.exists(outboxKey(keys, sessionId, 'target'))).toBe(0);
    } finally {
      await runtime.close();
    }
  });

  it('the HTTP API: POST /api/sessions with webhook answers its secret once; GET shows the URL only; a host not allowed is a 400 naming webhook', async () => {
    const receiver = new WebhookReceiver(await freePort());
    await receiver.listen();
    const hosts = [`127.0.0.1:${receiver.port}`];
    await startWorkerProcess(worker(hosts));
    const runtime = runtimeAllowing(hosts);
    const server = await startServer({
      client: clientOver(runtime),
      config: loadConfig({ prefix: h.prefix }, {}),
      logger: pino({ level: 'silent' }),
      port: 0,
    });
    try {
      const post = (body: unknown) =>
        fetch(`${server.url}/api/sessions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
      const options = { provider: 'fake', model: MODEL, cwd: env.cwd };
      const created = await post({ prompt: 'hello http', options, webhook: receiver.url });
      expect(created.status).toBe(201);
      const { sessionId, webhookSecret } = (await created.json()) as { sessionId: string; webhookSecret: string };
      expect(webhookSecret).toMatch(/^whsec_/);
      await until(async () => receiver.events().some((e) => e.type === 'turn.ended'), 60_000, 'turn.ended delivered');
      for (const r of receiver.requests) expect(validSignatures(r, [webhookSecret])).toBe(1);
      const detail = await fetch(`${server.url}/api/sessions/${sessionId}`);
      const text = await detail.text();
      expect(JSON.parse(text)).toMatchObject({ sessionId, webhook: receiver.url });
      expect(text).not.toContain(webhookSecret);

      const refused = await post({
        sessionId: 'wh-http-refused',
        prompt: 'hello',
        options,
        webhook: 'http://10.0.0.1/x',
      });
      expect(refused.status).toBe(400);
      expect(await refused.json()).toMatchObject({
        issues: [{ field: 'webhook', message: expect.stringContaining('10.0.0.1:80 is not a host') }],
      });
      expect((await fetch(`${server.url}/api/sessions/wh-http-refused`)).status).toBe(404);
    } finally {
      await server.close(1000);
      await runtime.close();
      await receiver.close();
    }
  }, 180_000);

  it('the CLI: enqueue --webhook prints the secret once, inspect shows the URL only; a host not allowed exits 2 naming webhook', async () => {
    const receiver = new WebhookReceiver(await freePort());
    await receiver.listen();
    const hosts = [`127.0.0.1:${receiver.port}`];
    const cliEnv = workerEnv(worker(hosts));
    await startWorkerProcess(worker(hosts));
    try {
      const out = await runCli(
        ['enqueue', 'hello cli', '--provider', 'fake', '--model', MODEL, '--webhook', receiver.url, '--json'],
        { env: cliEnv },
      );
      expect(out.exitCode, out.stderr).toBe(0);
      const { sessionId, webhookSecret } = JSON.parse(out.stdout) as { sessionId: string; webhookSecret: string };
      expect(webhookSecret).toMatch(/^whsec_/);
      await until(async () => receiver.events().some((e) => e.type === 'turn.ended'), 60_000, 'turn.ended delivered');
      expect(receiver.events().map((e) => [e.type, e.sessionId])).toEqual([
        ['turn.started', sessionId],
        ['turn.ended', sessionId],
      ]);
      for (const r of receiver.requests) expect(validSignatures(r, [webhookSecret])).toBe(1);

      const inspect = await runCli(['inspect', sessionId], { env: cliEnv });
      expect(inspect.stdout).toContain(`webhook ${receiver.url}`);
      const json = await runCli(['inspect', sessionId, '--json'], { env: cliEnv });
      expect(JSON.parse(json.stdout)).toMatchObject({ webhook: receiver.url });
      expect(json.stdout + inspect.stdout).not.toContain(webhookSecret);

      // Without --json the secret goes to stderr, once; the session id alone to stdout.
      const plain = await runCli(['enqueue', 'again', '--session', sessionId, '--webhook', receiver.url], {
        env: cliEnv,
      });
      expect(plain.exitCode, plain.stderr).toBe(0);
      expect(plain.stdout).toBe(`${sessionId}\n`);
      expect(plain.stderr).toMatch(/^webhook secret \(shown once\): whsec_\S+\n$/m);

      const refused = await runCli(
        ['enqueue', 'hello', '--provider', 'fake', '--model', MODEL, '--webhook', 'https://hooks.example.com/x'],
        { env: cliEnv },
      );
      expect(refused.exitCode).toBe(2);
      expect(refused.stderr).toContain('webhook: hooks.example.com:443 is not a host this deployment lets callers');
    } finally {
      await receiver.close();
    }
  }, 180_000);
});

/**
 * Both turns' prompts are in inspect's history, and both turns' start and end reached the webhook (turn 1's end and
 * turn 2's start are recorded by one write: their delivery order is not defined).
 */
async function expectTwoTurns(
  receiver: WebhookReceiver,
  session: SessionRecord,
  prompts: [string, string],
): Promise<void> {
  expect(summarize(session).history.flatMap((t) => (t.prompt === undefined ? [] : [t.prompt]))).toEqual([
    { turn: 1, text: prompts[0] },
    { turn: 2, text: prompts[1] },
  ]);
  await until(
    async () => receiver.events().filter((e) => e.type === 'turn.ended').length === 2,
    30_000,
    'both turn.ended delivered',
  );
  expect(
    receiver
      .events()
      .map((e) => `${e.type} ${e.turn}`)
      .sort(),
  ).toEqual(['turn.ended 1', 'turn.ended 2', 'turn.started 1', 'turn.started 2']);
}
