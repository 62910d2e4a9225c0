import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { runClaudeCode } from '../../../src/agents/claude-code/provider.ts';
import type { ApprovalGate } from '../../../src/agents/shared/approval-gate.ts';
import { findProcessesByMarker } from '../../../src/process/index.ts';
import type { CliMessage } from '../../../src/protocol/index.ts';
import { deploymentPolicy } from '../../../src/runtime/deployment-policy.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import { claudeBin, createClaudeEnv, type ClaudeEnv } from '../../support/claude-code-env.ts';
import { startFakeAnthropicServer, type FakeAnthropicServer } from '../../support/fake-anthropic-server.ts';
import { agentRecords, assistantText, turnEnded, useRuntimeSuite, type Harness } from '../../support/runtime.ts';
import { shortDeadline } from '../acp/acp-clis.ts';
import { decideAndEnd, ofType, firstApprovalRequest } from '../../support/approvals.ts';

/**
 * The native `claude-code` agent (the real Claude Code 2.1.332) in the durable runtime with the
 * operator's `permissionPrompts: "ask"`: its permission prompt (a stream-json `can_use_tool`
 * control request) becomes `approval.requested`, and the decision (an operator's, or the deadline's)
 * goes back to it as the `control_response`. The `tool-denied` model asks for
 * `touch made-by-tool.txt && echo hi`, which the default permission mode leaves to a prompt.
 */

let server: FakeAnthropicServer;
let env: ClaudeEnv;
let runtime: Runtime;
let h: Harness;
let operator: Record<string, Record<string, unknown>>;
const POLICY = { approvals: { deadlineMs: 600_000 } };
const MODEL = 'tool-denied';

useRuntimeSuite('claude-code-approvals', {}, async (s) => {
  if (!existsSync(claudeBin))
    throw new Error(`${claudeBin} not found: run scripts/install-agent-clis.sh (npm test does)`);
  h = s.h;
  server = await startFakeAnthropicServer();
  env = createClaudeEnv(server.url);
  operator = { 'claude-code': { ...env.options, permissionPrompts: 'ask' } };
  const policy = deploymentPolicy({ workspace: tmpdir(), policy: POLICY });
  runtime = new Runtime({ connect: s.h.connect, prefix: s.h.prefix, policy });
  await s.h.startWorker({ agentOptions: operator, policy });
});
afterAll(async () => {
  await runtime?.close();
  await server?.close();
  env?.cleanup();
});

const made = () => join(env.cwd, 'made-by-tool.txt');
beforeEach(() => rmSync(made(), { force: true }));

const ASK = () => ({ agent: 'claude-code', model: MODEL, cwd: env.cwd });

describe('claude-code permission prompts with permissionPrompts "ask"', () => {
  it('approve: approval.requested names the Bash command, the allow goes back to Claude Code and the command runs', async () => {
    const { sessionId } = await runtime.enqueue({ prompt: 'Make the file', options: ASK() });
    const requested = await firstApprovalRequest(runtime, sessionId);
    expect(requested).toMatchObject({
      tool: 'Bash',
      kind: 'execute',
      arguments: { command: 'touch made-by-tool.txt && echo hi' },
    });
    expect((requested.options as Array<{ kind: string }>).map((o) => o.kind)).toEqual(['allow_once', 'reject_once']);
    expect(existsSync(made())).toBe(false);
    const { state, messages } = await decideAndEnd(runtime, sessionId, requested, 'allow', 'allow_once');
    expect(state).toBe('completed');
    expect(ofType(messages, 'approval.decided')).toEqual([
      expect.objectContaining({ outcome: 'allowed', by: 'cli:test' }),
    ]);
    expect(existsSync(made())).toBe(true);
    expect(ofType(messages, 'tool.completed')).toEqual([
      expect.objectContaining({ result: expect.objectContaining({ content: 'hi' }) }),
    ]);
    expect(assistantText(messages)).toBe('Done.');
    expect(await agentRecords(sessionId)).toEqual([]);
  });

  it('deny: the command does not run, the model is told it was denied, and the turn completes', async () => {
    const before = server.requestsFor(MODEL).length;
    const { sessionId } = await runtime.enqueue({ prompt: 'Make the file', options: ASK() });
    const requested = await firstApprovalRequest(runtime, sessionId);
    const { state, messages } = await decideAndEnd(runtime, sessionId, requested, 'deny');
    expect(state).toBe('completed');
    expect(ofType(messages, 'approval.decided')).toEqual([
      expect.objectContaining({ outcome: 'denied', by: 'cli:test' }),
    ]);
    expect(ofType(messages, 'tool.failed')).toHaveLength(1);
    expect(existsSync(made())).toBe(false);
    expect(
      JSON.stringify(
        server
          .requestsFor(MODEL)
          .slice(before)
          .map((r) => r.body),
      ),
    ).toContain('The operator denied this tool use');
    expect(await agentRecords(sessionId)).toEqual([]);
  });

  it("nobody answers within the policy's deadline: denied by the deadline, the command does not run", async () => {
    const { runtime: rt, close } = await shortDeadline(h, operator, POLICY);
    try {
      const { sessionId } = await rt.enqueue({ prompt: 'Make the file', options: ASK() });
      expect((await turnEnded(rt, sessionId, 1, 120_000)).state).toBe('completed');
      const messages = await rt.readMessages(sessionId);
      expect(ofType(messages, 'approval.decided')).toEqual([
        expect.objectContaining({ outcome: 'denied', by: 'deadline' }),
      ]);
      expect(existsSync(made())).toBe(false);
    } finally {
      await close();
    }
  });

  it('a caller cannot turn the prompts on or off: permissionPrompts is the operator’s', async () => {
    await expect(
      runtime.enqueue({ prompt: 'Make the file', options: { ...ASK(), permissionPrompts: 'none' } }),
    ).rejects.toThrow(/permissionPrompts/);
  });
});

describe('claude-code asking, one attempt', () => {
  it('cancel while its prompt waits: the prompt gets no answer, the attempt rejects with the AbortError and leaves no process', async () => {
    const controller = new AbortController();
    let marker = '';
    let asked: AbortSignal | null = null;
    // A gate nobody answers: the cancel comes while Claude Code waits for its control_response.
    const gate: ApprovalGate = {
      ask: (_request, _emit, signal) => {
        asked = signal;
        setImmediate(() => controller.abort());
        return new Promise((resolve) => signal.addEventListener('abort', () => resolve(null), { once: true }));
      },
    };
    const seen: CliMessage[] = [];
    const run = (async () => {
      for await (const m of runClaudeCode(
        { prompt: 'Make the file', model: MODEL, ...env.options, permissionPrompts: 'ask' },
        { signal: controller.signal, approvals: gate, onSpawn: (a) => (marker = a.marker) },
      ))
        seen.push(m);
    })();
    await expect(run).rejects.toMatchObject({ name: 'AbortError' });
    expect((asked as AbortSignal | null)?.aborted).toBe(true);
    expect(seen.some((m) => m.type === 'tool.call')).toBe(true);
    expect(marker).not.toBe('');
    expect(await findProcessesByMarker(marker)).toEqual([]);
    expect(existsSync(made())).toBe(false);
  });
});
