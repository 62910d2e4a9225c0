import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, expect, it } from 'vitest';
import { createKeys } from '../../src/runtime/keys.ts';
import { createRedis } from '../../src/runtime/redis/index.ts';
import { prepareAgentAttempt } from '../../src/runtime/session-loop/agent-attempt.ts';
import { AttemptWorkspace } from '../../src/runtime/session-loop/workspace-attempt.ts';
import { SessionWriter } from '../../src/runtime/session-writer.ts';
import { SessionStore } from '../../src/runtime/store/session-store.ts';
import { createWorkspaces } from '../../src/workspace/index.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';
import { tempDir, workspacesIn } from '../workspace/support.ts';

/**
 * After a tool call ends, a workspace attempt waits (a few seconds at most) for the agent's state
 * to hold the tool's result before it records the files with it. A stop (cancel, timeout) during
 * that wait ends it: the agent is being stopped and may never write the result.
 */

let server: RedisServer;
let redis: Redis;
let store: SessionStore;
let tmp: { dir: string; cleanup: () => void };

beforeAll(async () => {
  server = await startRedis();
  redis = createRedis(server.url, { role: 'workspace-attempt-test', maxRetriesPerRequest: null, log: () => undefined });
  store = new SessionStore(redis, createKeys('wsattempt'));
});
afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
});
beforeEach(() => {
  tmp = tempDir();
});
afterEach(() => tmp.cleanup());

it("a stop while it waits for the agent's state to record a tool's result ends the wait, with nothing recorded", async () => {
  const sessionId = 'stopped-mid-wait';
  const agentSessionId = '0123abcd-0000-4000-8000-000000000001';
  // pi's session file as it stands when the tool's end is printed: the call, not yet its result.
  const sessionDir = join(tmp.dir, 'pi-sessions');
  mkdirSync(sessionDir, { recursive: true });
  const lines = [
    { type: 'session', version: 3, id: agentSessionId, timestamp: new Date().toISOString(), cwd: tmp.dir },
    { type: 'message', id: 'u1', message: { role: 'user', content: [{ type: 'text', text: 'run it' }] } },
    {
      type: 'message',
      id: 'a1',
      message: { role: 'assistant', content: [{ type: 'toolCall', id: 'call_1', name: 'bash', arguments: {} }] },
    },
  ];
  writeFileSync(
    join(sessionDir, `2026-12-03T00-00-00-000Z_${agentSessionId}.jsonl`),
    lines.map((l) => `${JSON.stringify(l)}\n`).join(''),
  );
  const workspaces = createWorkspaces(workspacesIn(tmp.dir));
  const attempt = await prepareAgentAttempt({
    agentName: 'pi',
    hostOptions: { pi: { sessionDir } },
    callerOptions: { cwd: workspaces.path(sessionId) },
    sessionId,
    scope: 'wsattempt',
  });
  const warnings: string[] = [];
  const workspace = new AttemptWorkspace({
    workspaces,
    store,
    writer: new SessionWriter(store, sessionId, 'no-lease-needed: nothing is flushed'),
    sessionId,
    request: {
      sessionId,
      turn: 1,
      attempt: 1,
      promptId: 'p1',
      text: 'run it',
      continuation: false,
      agentSessionId: null,
      options: {},
    },
    attempt,
    rollback: false,
    warn: (message) => warnings.push(message),
  });
  await workspace.begin(undefined);
  workspace.toolCalled('call_1');
  const stop = new AbortController();
  // The cancel lands while the runner waits (the result never comes: the agent is being stopped).
  const stopping = setTimeout(() => stop.abort(new Error('cancelled')), 200);
  try {
    await workspace.toolEnded('call_1', agentSessionId, stop.signal);
  } finally {
    clearTimeout(stopping);
  }
  expect(stop.signal.aborted).toBe(true);
  // Not "the agent's state did not record a tool's result in time": the wait ended with the stop.
  expect(warnings).toEqual([]);
});
