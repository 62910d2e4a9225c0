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
 * that wait ends it: the agent is being stopped and may never write the result. The agent's cut
 * (`stateAfterTool`) is told how many tool calls its current process has reported ended.
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

/** The first attempt of turn 1 of the session, in its workspace, with no rollback. */
function attemptWorkspace(
  workspaces: ReturnType<typeof createWorkspaces>,
  sessionId: string,
  attempt: ConstructorParameters<typeof AttemptWorkspace>[0]['attempt'],
  warn: (message: string) => void,
): AttemptWorkspace {
  return new AttemptWorkspace({
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
    warn,
  });
}

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
  const workspace = attemptWorkspace(workspaces, sessionId, attempt, (message) => warnings.push(message));
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

it("the agent's stateAfterTool gets how many tool calls its current process reported ended, from 1 again after a restart", async () => {
  const sessionId = 'counted-calls';
  const workspaces = createWorkspaces(workspacesIn(tmp.dir));
  const prepared = await prepareAgentAttempt({
    agentName: 'pi',
    hostOptions: { pi: { sessionDir: join(tmp.dir, 'pi-sessions') } },
    callerOptions: { cwd: workspaces.path(sessionId) },
    sessionId,
    scope: 'wsattempt',
  });
  // Codex's cut needs the count (its printed item ids are not its rollout's call ids): what each call got.
  const seen: { id: string; toolCallsEnded: number }[] = [];
  const attempt = {
    ...prepared,
    agent: {
      ...prepared.agent,
      exportState: () => Promise.resolve('state'),
      // `later`: nothing is snapshotted, the count is what this test is about.
      stateAfterTool: (state: string, id: string, run: { toolCallsEnded: number }) => {
        seen.push({ id, toolCallsEnded: run.toolCallsEnded });
        return { state, later: true };
      },
    },
  };
  const workspace = attemptWorkspace(workspaces, sessionId, attempt, () => undefined);
  await workspace.begin(undefined);
  // No such process: nothing carries the attempt's marker, so nothing is held still.
  const spawned = { pid: 2 ** 22 + 1, startTime: null, sandbox: 'none' as const };
  workspace.agentStarted(spawned);
  for (const id of ['a', 'b']) {
    workspace.toolCalled(id);
    await workspace.toolEnded(id, 'agent-session');
  }
  // A steer's restart: the agent runs again in the same attempt, a new process.
  workspace.agentStarted(spawned);
  workspace.toolCalled('c');
  await workspace.toolEnded('c', 'agent-session');
  // A batch of two: recorded once both have ended, each cut with the count of the whole batch.
  workspace.toolCalled('d');
  workspace.toolCalled('e');
  await workspace.toolEnded('d', 'agent-session');
  await workspace.toolEnded('e', 'agent-session');
  expect(seen).toEqual([
    { id: 'a', toolCallsEnded: 1 },
    { id: 'b', toolCallsEnded: 2 },
    { id: 'c', toolCallsEnded: 1 },
    { id: 'd', toolCallsEnded: 3 },
    { id: 'e', toolCallsEnded: 3 },
  ]);
});
