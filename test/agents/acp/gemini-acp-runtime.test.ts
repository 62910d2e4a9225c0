import { tmpdir } from 'node:os';
import { afterAll, describe, expect, it } from 'vitest';
import { deploymentPolicy } from '../../../src/runtime/deployment-policy.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import {
  geminiBuiltinScripts,
  startFakeGeminiServer,
  type FakeGeminiServer,
} from '../../support/fake-gemini-server.ts';
import { agentRecords, assistantText, turnEnded, useRuntimeSuite, type Harness } from '../../support/runtime.ts';
import { geminiAcpEnv, shortDeadline, type AcpCliEnv } from './acp-clis.ts';
import { decideAndEnd, ofType, firstApprovalRequest } from '../../support/approvals.ts';

/**
 * `acp:gemini` (the real gemini 0.61 --acp) through the durable runtime: a 500, then success, one
 * request per attempt; and its permission requests for a shell command in `ask` mode (approve,
 * deny, the deadline).
 */

let gemini: FakeGeminiServer;
let env: AcpCliEnv;
let runtime: Runtime;
let h: Harness;
let operator: Record<string, { command: string; args: string[]; env: Record<string, string> }>;
const POLICY = { permissions: { 'acp:gemini-ask': { ceiling: 'ask' } }, approvals: { deadlineMs: 600_000 } };
/** The shell command of the builtin `fake-tool-fail` model, which gemini asks permission for. */
const ASK_MODEL = 'fake-tool-fail';

useRuntimeSuite('acp-gemini-runtime', {}, async (s) => {
  h = s.h;
  gemini = await startFakeGeminiServer({ scripts: geminiBuiltinScripts() });
  gemini.setScript('rt-flaky', [{ status: 500 }, { text: ['Recovered', ' after a 500.'] }]);
  env = geminiAcpEnv(gemini.url);
  operator = { 'acp:gemini': env.agent('rt-flaky'), 'acp:gemini-ask': env.agent(ASK_MODEL) };
  const policy = deploymentPolicy({ workspace: tmpdir(), agents: operator, policy: POLICY });
  runtime = new Runtime({ connect: s.h.connect, prefix: s.h.prefix, policy });
  await s.h.startWorker({ agentOptions: operator, policy });
});
afterAll(async () => {
  await runtime?.close();
  await gemini?.close();
  env?.cleanup();
});

describe('acp:gemini in the durable runtime', () => {
  it('a 500 from the API, then success: the session machine retries once, each attempt one request, the turn completes', async () => {
    const { sessionId } = await runtime.enqueue({
      prompt: 'Say hello',
      options: { agent: 'acp:gemini', cwd: env.cwd },
      retryPolicy: { maxAttempts: 3, initialDelayMs: 0 },
    });
    const view = await turnEnded(runtime, sessionId, 1, 120_000);
    expect(view.state).toBe('completed');
    const messages = await runtime.readMessages(sessionId);
    expect(
      messages.filter((m) => m.type === 'terminal.failed').map((m) => (m.content as { category: string }).category),
    ).toEqual(['server_error']);
    expect(assistantText(messages)).toBe('Recovered after a 500.');
    expect(gemini.requestsFor('rt-flaky')).toHaveLength(2);
    expect(await agentRecords(sessionId)).toEqual([]);
  });
});

/** Whether the shell command ran: its `ls` error is in what gemini sent the model after the tool. */
const commandRan = (from: number) =>
  JSON.stringify(
    gemini
      .requestsFor(ASK_MODEL)
      .slice(from)
      .map((r) => r.body),
  ).includes('No such file or directory');
const ASK = () => ({ agent: 'acp:gemini-ask', permissionMode: 'ask', cwd: env.cwd });

describe('acp:gemini permission requests in ask mode', () => {
  it('approve: gemini gets its allow option, the command runs and the model gets its output', async () => {
    const before = gemini.requestsFor(ASK_MODEL).length;
    const { sessionId } = await runtime.enqueue({ prompt: 'Run the command', options: ASK() });
    const requested = await firstApprovalRequest(runtime, sessionId);
    expect(requested).toMatchObject({ kind: 'execute' });
    expect((requested.options as Array<{ kind: string }>).map((o) => o.kind)).toContain('allow_once');
    expect(commandRan(before)).toBe(false);
    const { state, messages } = await decideAndEnd(runtime, sessionId, requested, 'allow', 'allow_once');
    expect(state).toBe('completed');
    expect(ofType(messages, 'approval.decided')).toEqual([
      expect.objectContaining({ outcome: 'allowed', by: 'cli:test' }),
    ]);
    expect(commandRan(before)).toBe(true);
    expect(assistantText(messages)).toBe('The command failed.');
    expect(await agentRecords(sessionId)).toEqual([]);
  });

  it('deny: gemini gets its reject option, the command does not run, tool.failed says so and the turn completes', async () => {
    const before = gemini.requestsFor(ASK_MODEL).length;
    const { sessionId } = await runtime.enqueue({ prompt: 'Run the command', options: ASK() });
    const requested = await firstApprovalRequest(runtime, sessionId);
    const { state, messages } = await decideAndEnd(runtime, sessionId, requested, 'deny');
    expect(state).toBe('completed');
    expect(ofType(messages, 'approval.decided')).toEqual([
      expect.objectContaining({ outcome: 'denied', by: 'cli:test' }),
    ]);
    expect(ofType(messages, 'tool.failed')).toHaveLength(1);
    expect(commandRan(before)).toBe(false);
  });

  it("nobody answers within the policy's deadline: denied by the deadline, the command does not run", async () => {
    const before = gemini.requestsFor(ASK_MODEL).length;
    const { runtime: rt, close } = await shortDeadline(h, operator, POLICY);
    try {
      const { sessionId } = await rt.enqueue({ prompt: 'Run the command', options: ASK() });
      expect((await turnEnded(rt, sessionId, 1, 120_000)).state).toBe('completed');
      const messages = await rt.readMessages(sessionId);
      expect(ofType(messages, 'approval.decided')).toEqual([
        expect.objectContaining({ outcome: 'denied', by: 'deadline' }),
      ]);
      expect(commandRan(before)).toBe(false);
    } finally {
      await close();
    }
  });
});
