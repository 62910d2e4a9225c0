import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import * as acp from '@agentclientprotocol/sdk';
import { afterAll, describe, expect, it } from 'vitest';
import { deploymentPolicy } from '../../../src/runtime/deployment-policy.ts';
import { markerScope, reapOrphans } from '../../../src/runtime/orphans.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import { SESSIOND_BIN } from '../../support/cli.ts';
import { REPO_ROOT } from '../../support/pi-env.ts';
import { internals } from '../../../src/runtime/internals.ts';
import { agentRecords, until, useRuntimeSuite, type Harness } from '../../support/runtime.ts';
import {
  killAllWorkerProcesses,
  startWorkerProcess,
  workerEnv,
  type WorkerProcess,
  type WorkerProcessOptions,
} from '../../support/worker-process.ts';

/**
 * `sessiond acp` as its own process, driven by the SDK's client side over its stdio, as an editor
 * would: the sessions it creates run on `sessiond worker` processes (the fake ACP agent on the
 * SDK's agent side as their agent); `sessiond acp` itself talks only to Redis.
 */

const FAKE = fileURLToPath(new URL('../../fixtures/acp/fake-acp-agent.mjs', import.meta.url));
const state = mkdtempSync(join(tmpdir(), 'sessiond-acp-server-'));
const OPERATOR = { 'acp:fake': { command: process.execPath, args: [FAKE], env: { FAKE_ACP_STATE_DIR: state } } };
const POLICY = { permissions: { 'acp:fake': { ceiling: 'ask' } } };
const policy = deploymentPolicy({ workspace: tmpdir(), agents: OPERATOR, policy: POLICY });

let h: Harness;
let runtime: Runtime;
let workerOptions: WorkerProcessOptions;
let worker: WorkerProcess;
const clients: ChildProcess[] = [];

useRuntimeSuite(
  'acp-server',
  {
    cleanup: async () => {
      for (const child of clients) child.kill('SIGKILL');
      await killAllWorkerProcesses();
      if (h !== undefined) await reapOrphans(markerScope(h.prefix));
    },
  },
  async (s) => {
    h = s.h;
    runtime = new Runtime({ connect: h.connect, prefix: h.prefix, policy });
    workerOptions = {
      redisUrl: s.redis.url,
      prefix: h.prefix,
      env: s.env,
      stateDir: h.stateDir,
      leaseTtl: '2s',
      stalledInterval: '1s',
      extraEnv: { SESSIOND_AGENT_OPTIONS: JSON.stringify(OPERATOR), SESSIOND_POLICY: JSON.stringify(POLICY) },
    };
    worker = await startWorkerProcess(workerOptions);
  },
);
afterAll(async () => {
  await runtime?.close();
  rmSync(state, { recursive: true, force: true });
});

interface Client {
  agent: acp.ClientContext;
  updates: acp.SessionNotification[];
  /** How the client answers permission requests (default: cancelled). */
  onPermission: (params: acp.RequestPermissionRequest) => acp.RequestPermissionResponse;
  permissions: acp.RequestPermissionRequest[];
  close(): void;
}

/** Spawns `sessiond acp --agent acp:fake` and connects the SDK's client side to its stdio, initialized. */
async function startClient(): Promise<Client> {
  const child = spawn(process.execPath, [SESSIOND_BIN, 'acp', '--agent', 'acp:fake'], {
    cwd: REPO_ROOT,
    env: workerEnv(workerOptions),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  clients.push(child);
  child.stderr?.resume();
  const client: Client = {
    agent: undefined as unknown as acp.ClientContext,
    updates: [],
    permissions: [],
    onPermission: () => ({ outcome: { outcome: 'cancelled' } }),
    close: () => child.kill('SIGTERM'),
  };
  const connection = acp
    .client({ name: 'test-editor' })
    .onNotification('session/update', ({ params }) => {
      client.updates.push(params);
    })
    .onRequest('session/request_permission', ({ params }) => {
      client.permissions.push(params);
      return client.onPermission(params);
    })
    .connect(
      acp.ndJsonStream(Writable.toWeb(child.stdin!), Readable.toWeb(child.stdout!) as ReadableStream<Uint8Array>),
    );
  client.agent = connection.agent;
  const init = await connection.agent.request('initialize', {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: {},
  });
  expect(init.agentCapabilities?.loadSession).toBe(true);
  return client;
}

const textOf = (
  client: Client,
  sessionId: string,
  kind: 'agent_message_chunk' | 'agent_thought_chunk' = 'agent_message_chunk',
) =>
  client.updates
    .filter((u) => u.sessionId === sessionId && u.update.sessionUpdate === kind)
    .map((u) => (u.update as { content: { type: string; text?: string } }).content.text ?? '')
    .join('');

describe('sessiond acp, driven by an ACP client', () => {
  let firstSession = '';

  it('prompt: the updates carry exactly the fake model’s text (and its thought), the prompt ends end_turn', async () => {
    const client = await startClient();
    try {
      const { sessionId } = await client.agent.request('session/new', { cwd: state, mcpServers: [] });
      firstSession = sessionId;
      const response = await client.agent.request('session/prompt', {
        sessionId,
        prompt: [{ type: 'text', text: 'say hello world' }],
      });
      expect(response.stopReason).toBe('end_turn');
      expect(textOf(client, sessionId)).toBe('hello world');
      expect(textOf(client, sessionId, 'agent_thought_chunk')).toBe('thinking about it');
      // It is a sessiond session like any other.
      expect((await runtime.getSession(sessionId))?.state).toBe('completed');
      // Its tenant is the local caller's (config caller.tenant, default local): a {"tenant":"*"} limit applies to it (issue 25).
      expect(await internals(runtime).redis.hget(internals(runtime).store.key(sessionId, 'meta'), 'tenant')).toBe(
        'local',
      );
    } finally {
      client.close();
    }
  }, 60_000);

  it('session/load replays the whole stored log in order: each turn’s prompt, then what the agent said in it', async () => {
    const client = await startClient();
    try {
      // A second turn of the first test's session, from a connection that did not create it.
      expect(
        (
          await client.agent.request('session/prompt', {
            sessionId: firstSession,
            prompt: [{ type: 'text', text: 'say second turn' }],
          })
        ).stopReason,
      ).toBe('end_turn');
      client.updates.length = 0;
      await client.agent.request('session/load', { sessionId: firstSession, cwd: state, mcpServers: [] });
      // Consecutive chunks of one kind joined: the replay as an editor shows it.
      const shown: Array<[string, string]> = [];
      for (const { sessionId, update } of client.updates) {
        expect(sessionId).toBe(firstSession);
        const text = (update as { content?: { text?: string } }).content?.text ?? '';
        const last = shown.at(-1);
        if (last !== undefined && last[0] === update.sessionUpdate) last[1] += text;
        else shown.push([update.sessionUpdate, text]);
      }
      expect(shown).toEqual([
        ['user_message_chunk', 'say hello world'],
        ['agent_thought_chunk', 'thinking about it'],
        ['agent_message_chunk', 'hello world'],
        ['user_message_chunk', 'say second turn'],
        ['agent_thought_chunk', 'thinking about it'],
        ['agent_message_chunk', 'second turn'],
      ]);
      const unknown = await client.agent
        .request('session/load', { sessionId: 'no-such-session', cwd: state, mcpServers: [] })
        .catch((e: unknown) => e);
      expect(unknown).toMatchObject({ code: -32002 });
    } finally {
      client.close();
    }
  }, 60_000);

  it('session/cancel mid-turn: the prompt ends cancelled and no agent process is left', async () => {
    const client = await startClient();
    try {
      const { sessionId } = await client.agent.request('session/new', { cwd: state, mcpServers: [] });
      const prompt = client.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'long' }] });
      await until(
        async () => client.updates.some((u) => u.sessionId === sessionId && u.update.sessionUpdate === 'tool_call'),
        30_000,
        'the long tool call',
      );
      await client.agent.notify('session/cancel', { sessionId });
      expect((await prompt).stopReason).toBe('cancelled');
      expect((await runtime.getSession(sessionId))?.state).toBe('cancelled');
      expect(await agentRecords(sessionId)).toEqual([]);
      // Before the answer, the client was told the running tool call failed (issue 28): none is left running.
      const ofSession = client.updates.filter((u) => u.sessionId === sessionId).map((u) => u.update);
      const call = ofSession.find((u) => u.sessionUpdate === 'tool_call');
      expect(ofSession.at(-1)).toMatchObject({
        sessionUpdate: 'tool_call_update',
        toolCallId: call?.sessionUpdate === 'tool_call' ? call.toolCallId : '',
        status: 'failed',
      });
    } finally {
      client.close();
    }
  }, 60_000);

  it("a permission request of the session's agent (permissionMode ask from _meta) goes to the client; its answer is the decision", async () => {
    const client = await startClient();
    client.onPermission = (params) => ({
      outcome: { outcome: 'selected', optionId: params.options.find((o) => o.kind === 'allow_once')?.optionId ?? '' },
    });
    try {
      const { sessionId } = await client.agent.request('session/new', {
        cwd: state,
        mcpServers: [],
        _meta: { sessiond: { options: { permissionMode: 'ask' } } },
      });
      const response = await client.agent.request('session/prompt', {
        sessionId,
        prompt: [{ type: 'text', text: 'ask' }],
      });
      expect(response.stopReason).toBe('end_turn');
      expect(client.permissions).toHaveLength(1);
      expect(client.permissions[0]?.toolCall).toMatchObject({ title: 'rm -rf build', kind: 'execute' });
      expect(textOf(client, sessionId)).toBe('permission: yes');
      const decided = (await runtime.readMessages(sessionId)).filter((m) => m.type === 'approval.decided');
      expect(decided.map((m) => m.content)).toEqual([
        expect.objectContaining({ outcome: 'allowed', optionId: 'yes', by: 'acp' }),
      ]);
      // A mode above the policy's ceiling is refused at session/new, naming the field.
      const refused = await client.agent
        .request('session/new', {
          cwd: state,
          mcpServers: [],
          _meta: { sessiond: { options: { permissionMode: 'allow' } } },
        })
        .catch((e: unknown) => e);
      expect(refused).toMatchObject({ code: -32602, message: expect.stringContaining('options.permissionMode') });
    } finally {
      client.close();
    }
  }, 60_000);

  it('kill -9 of the worker mid-prompt: the client’s prompt still ends end_turn once another worker took over', async () => {
    const client = await startClient();
    try {
      const { sessionId } = await client.agent.request('session/new', { cwd: state, mcpServers: [] });
      const prompt = client.agent.request('session/prompt', {
        sessionId,
        prompt: [{ type: 'text', text: 'wait finished' }],
      });
      await until(async () => textOf(client, sessionId).includes('waiting'), 30_000, 'the agent waiting');
      worker.kill('SIGKILL');
      expect(await worker.exited).toEqual({ code: null, signal: 'SIGKILL' });
      writeFileSync(join(state, 'go'), '1');
      worker = await startWorkerProcess(workerOptions);
      expect((await prompt).stopReason).toBe('end_turn');
      expect(textOf(client, sessionId)).toMatch(/finished$/);
      const attempts = (await runtime.getSession(sessionId))?.context?.turn?.attempts ?? [];
      expect(attempts.map((a) => a.outcome)).toEqual(['interrupted', 'completed']);
    } finally {
      client.close();
    }
  }, 120_000);
});
