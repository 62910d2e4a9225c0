import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { deploymentPolicy } from '../../src/runtime/deployment-policy.ts';
import { summarize } from '../../src/runtime/inspect.ts';
import { markerScope, reapOrphans } from '../../src/runtime/orphans.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import type { StoredMessage } from '../../src/runtime/store/session-store.ts';
import {
  agentRecords,
  assistantText,
  expectWholeLog,
  turnEnded,
  until,
  useRuntimeSuite,
  type Harness,
} from '../support/runtime.ts';
import { killAllWorkerProcesses, startWorkerProcess, type WorkerProcessOptions } from '../support/worker-process.ts';

/**
 * kill -9 of a `sessiond worker` process while an agent's permission request waits for an
 * operator: the request is not lost. The operator decides while no worker holds the session; the
 * next worker's attempt asks the same request again (same id), finds the decision and gives it to
 * the agent at once: asked again once, decided once, the tool run once.
 */

const FAKE = fileURLToPath(new URL('../fixtures/acp/fake-acp-agent.mjs', import.meta.url));
const state = mkdtempSync(join(tmpdir(), 'sessiond-approvals-crash-'));
const OPERATOR = { 'acp:fake': { command: process.execPath, args: [FAKE], env: { FAKE_ACP_STATE_DIR: state } } };
const POLICY = { permissions: { 'acp:fake': { ceiling: 'ask' } }, approvals: { deadlineMs: 600_000 } };
const policy = deploymentPolicy({ workspace: tmpdir(), agents: OPERATOR, policy: POLICY });

let h: Harness;
let runtime: Runtime;
let workerOptions: WorkerProcessOptions;
useRuntimeSuite(
  'approvals-crash',
  {
    cleanup: async () => {
      await killAllWorkerProcesses();
      if (h !== undefined) await reapOrphans(markerScope(h.prefix));
    },
  },
  (s) => {
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
  },
);
afterAll(async () => {
  await runtime?.close();
  rmSync(state, { recursive: true, force: true });
});

const ofType = (messages: readonly StoredMessage[], type: string) => messages.filter((m) => m.type === type);

function ranIn(messages: readonly StoredMessage[]): number {
  const agentSessions = new Set(
    messages
      .filter((m) => m.type === 'session.started' || m.type === 'session.resumed')
      .map((m) => String((m.content as { sessionId: string }).sessionId)),
  );
  const lines = existsSync(join(state, 'ran')) ? readFileSync(join(state, 'ran'), 'utf8').split('\n') : [];
  return lines.filter((l) => agentSessions.has(l)).length;
}

describe('an approval survives a worker kill -9', () => {
  it('decided while no worker holds the session: the next attempt asks the same request again and gets the decision once', async () => {
    const first = await startWorkerProcess(workerOptions);
    const { sessionId } = await runtime.enqueue({
      prompt: 'ask',
      options: { agent: 'acp:fake', permissionMode: 'ask' },
      retryPolicy: { initialDelayMs: 200, jitter: 'none' },
    });
    const asked = await until(
      async () => ofType(await runtime.readMessages(sessionId), 'approval.requested')[0],
      30_000,
      'approval.requested',
    );
    const requestId = String((asked.content as { requestId: string }).requestId);

    first.kill('SIGKILL');
    expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });
    // Nobody holds the session now; it still awaits the operator.
    const waiting = summarize((await runtime.getSession(sessionId))!);
    expect(waiting.approvals).toEqual([expect.objectContaining({ requestId })]);
    expect(waiting.approvals[0]?.decision).toBeUndefined();
    await runtime.decideApproval(sessionId, requestId, 'allow', 'cli:ops');
    expect(summarize((await runtime.getSession(sessionId))!).approvals[0]?.decision).toMatchObject({
      outcome: 'allowed',
      by: 'cli:ops',
    });

    await startWorkerProcess(workerOptions);
    const session = await turnEnded(runtime, sessionId, 1, 60_000);
    expect(session.state).toBe('completed');
    expect((session.context?.turn?.attempts ?? []).map((a) => [a.attempt, a.outcome])).toEqual([
      [1, 'interrupted'],
      [2, 'completed'],
    ]);
    const messages = await runtime.readMessages(sessionId);
    expectWholeLog(messages);
    const requested = ofType(messages, 'approval.requested');
    expect(
      requested.map((m) => [
        m.attempt,
        (m.content as { requestId: string }).requestId,
        (m.content as { reasked?: boolean }).reasked ?? false,
      ]),
    ).toEqual([
      [1, requestId, false],
      [2, requestId, true],
    ]);
    // The deadline is the first ask's: a re-ask does not extend it.
    expect((requested[1]?.content as { deadlineAt: number }).deadlineAt).toBe(
      (requested[0]?.content as { deadlineAt: number }).deadlineAt,
    );
    const decided = ofType(messages, 'approval.decided');
    expect(
      decided.map((m) => [m.attempt, (m.content as { requestId: string }).requestId, (m.content as { by: string }).by]),
    ).toEqual([[2, requestId, 'cli:ops']]);
    expect(assistantText(messages)).toBe('permission: yes');
    expect(ranIn(messages)).toBe(1);
    expect(await agentRecords(sessionId)).toEqual([]);
  }, 120_000);
});
