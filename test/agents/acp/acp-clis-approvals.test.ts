import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { deploymentPolicy } from '../../../src/runtime/deployment-policy.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import {
  startFakeAnthropicServer,
  type FakeAnthropicServer,
  type ScriptContext as AnthropicContext,
} from '../../support/fake-anthropic-server.ts';
import type { ScriptContext as OpenAiContext } from '../../support/fake-model-server.ts';
import { agentRecords, turnEnded, until, useRuntimeSuite, type Harness } from '../../support/runtime.ts';
import { claudeAcpEnv, OPENCODE_TITLE_MODEL, opencodeEnv, qwenEnv, shortDeadline, type AcpCliEnv } from './acp-clis.ts';
import { ofType } from '../../support/approvals.ts';

/**
 * The approval flow of `acp:qwen`, `acp:opencode` and `acp:claude` on their real CLIs in the
 * durable runtime (permissionMode `ask`): each agent's `session/request_permission` for a shell
 * command becomes `approval.requested`; an operator approves one command and denies the next
 * within one turn; a request nobody answers is denied by the policy's deadline. Whether a command
 * ran is the file it creates in the agent's cwd. (acp:gemini's: gemini-acp-runtime.test.ts.)
 */
let h: Harness;
let runtime: Runtime;
let anthropic: FakeAnthropicServer;
let deadline: Awaited<ReturnType<typeof shortDeadline>>;
const envs: Record<string, AcpCliEnv> = {};
let operator: Record<string, Record<string, unknown>> = {};
const POLICY = {
  permissions: Object.fromEntries(['acp:qwen', 'acp:opencode', 'acp:claude'].map((a) => [a, { ceiling: 'ask' }])),
  approvals: { deadlineMs: 600_000 },
};

/** Tool results the model has seen so far (OpenAI-compatible: `tool` messages). */
const openAiResults = (ctx: OpenAiContext) => (ctx.body.messages ?? []).filter((m) => m.role === 'tool').length;
/** Tool results the model has seen so far (Anthropic: `tool_result` blocks). */
const anthropicResults = (ctx: AnthropicContext) =>
  (ctx.body.messages ?? [])
    .flatMap((m) => (m.role === 'user' && Array.isArray(m.content) ? (m.content as Array<{ type?: unknown }>) : []))
    .filter((b) => b.type === 'tool_result').length;
/** claude-agent-acp asks the model for the session's title: answered apart. */
const isTitleRequest = (ctx: AnthropicContext) => JSON.stringify(ctx.body.messages).includes('Write the title');

/** The model: `touch approved`, then `touch denied`, then its text. */
const TWO = ['approved', 'denied'];

useRuntimeSuite('acp-clis-approvals', {}, async (s) => {
  h = s.h;
  const qwenShell = (command: string) => ({ name: 'run_shell_command', arguments: { command } });
  const opencodeShell = (command: string) => ({ name: 'bash', arguments: { command } });
  for (const [prefix, shell] of [
    ['q', qwenShell],
    ['oc', opencodeShell],
  ] as const) {
    s.server.setScript(`${prefix}-two`, (ctx) => {
      const seen = openAiResults(ctx);
      return seen < TWO.length ? { toolCalls: [shell(`touch ${TWO[seen]}`)] } : { text: 'Both answered.' };
    });
    s.server.setScript(`${prefix}-one`, (ctx) =>
      openAiResults(ctx) === 0 ? { toolCalls: [shell('touch unanswered')] } : { text: 'Done.' },
    );
  }
  s.server.setScript(OPENCODE_TITLE_MODEL, { text: 'A title' });
  anthropic = await startFakeAnthropicServer();
  const bash = (command: string) => ({ name: 'Bash', input: { command, description: 'Touch a file' } });
  anthropic.setScript('cc-two', (ctx) => {
    if (isTitleRequest(ctx)) return { text: 'A title' };
    const seen = anthropicResults(ctx);
    return seen < TWO.length ? { toolUses: [bash(`touch ${TWO[seen]}`)] } : { text: 'Both answered.' };
  });
  anthropic.setScript('cc-one', (ctx) =>
    isTitleRequest(ctx)
      ? { text: 'A title' }
      : anthropicResults(ctx) === 0
        ? { toolUses: [bash('touch unanswered')] }
        : { text: 'Done.' },
  );
  envs['acp:qwen'] = qwenEnv(`${s.server.url}/v1`);
  envs['acp:opencode'] = opencodeEnv(`${s.server.url}/v1`, ['oc-two', 'oc-one']);
  envs['acp:claude'] = claudeAcpEnv(anthropic.url);
  // One operator entry per agent and script: `acp:<agent>` asks twice, `acp:<agent>-one` once.
  const models: Record<string, [string, string]> = {
    'acp:qwen': ['q-two', 'q-one'],
    'acp:opencode': ['oc-two', 'oc-one'],
    'acp:claude': ['cc-two', 'cc-one'],
  };
  operator = Object.fromEntries(
    Object.entries(models).flatMap(([name, [two, one]]) => [
      [name, envs[name]!.agent(two)],
      [`${name}-one`, envs[name]!.agent(one)],
    ]),
  );
  const policy = {
    ...POLICY,
    permissions: Object.fromEntries(Object.keys(operator).map((a) => [a, { ceiling: 'ask' }])),
  };
  runtime = new Runtime({
    connect: h.connect,
    prefix: h.prefix,
    policy: deploymentPolicy({ workspace: tmpdir(), agents: operator, policy }),
  });
  await h.startWorker({
    agentOptions: operator,
    policy: deploymentPolicy({ workspace: tmpdir(), agents: operator, policy }),
  });
  deadline = await shortDeadline(h, operator, policy);
});
afterAll(async () => {
  await deadline?.close();
  await runtime?.close();
  await anthropic?.close();
  for (const env of Object.values(envs)) env.cleanup();
});

const made = (agent: string, file: string) => existsSync(join(envs[agent]!.cwd, file));

// Budgets for a loaded host, not timing assertions.
describe.each(['acp:qwen', 'acp:opencode', 'acp:claude'])(
  '%s on its real CLI: approvals in ask mode',
  { timeout: 300_000 },
  (agent) => {
    it('an operator approves the first command and denies the second, in one turn: the first runs, the second does not, each decision in the log once', async () => {
      const { sessionId } = await runtime.enqueue({
        prompt: 'Touch two files',
        options: { agent, permissionMode: 'ask', cwd: envs[agent]!.cwd },
      });
      const requested = (n: number) =>
        until(
          async () => ofType(await runtime.readMessages(sessionId), 'approval.requested')[n],
          180_000,
          `approval request ${n + 1}`,
        );
      const first = await requested(0);
      expect(JSON.stringify(first.arguments)).toContain('touch approved');
      expect((first.options as Array<{ kind: string }>).map((o) => o.kind)).toContain('allow_once');
      expect(made(agent, 'approved')).toBe(false);
      await runtime.decideApproval(sessionId, String(first.requestId), 'allow', 'cli:test', 'allow_once');
      const second = await requested(1);
      expect(JSON.stringify(second.arguments)).toContain('touch denied');
      expect(made(agent, 'approved')).toBe(true);
      await runtime.decideApproval(sessionId, String(second.requestId), 'deny', 'cli:test');
      expect((await turnEnded(runtime, sessionId, 1, 180_000)).state).toBe('completed');
      const messages = await runtime.readMessages(sessionId);
      expect(ofType(messages, 'approval.decided').map((d) => [d.requestId, d.outcome, d.by])).toEqual([
        [first.requestId, 'allowed', 'cli:test'],
        [second.requestId, 'denied', 'cli:test'],
      ]);
      expect(made(agent, 'denied')).toBe(false);
      expect(await agentRecords(sessionId)).toEqual([]);
    });

    it("nobody answers within the policy's deadline: denied by the deadline, the command does not run, the turn completes", async () => {
      const { sessionId } = await deadline.runtime.enqueue({
        prompt: 'Touch a file',
        options: { agent: `${agent}-one`, permissionMode: 'ask', cwd: envs[agent]!.cwd },
      });
      expect((await turnEnded(deadline.runtime, sessionId, 1, 180_000)).state).toBe('completed');
      const messages = await deadline.runtime.readMessages(sessionId);
      expect(ofType(messages, 'approval.decided')).toEqual([
        expect.objectContaining({ outcome: 'denied', by: 'deadline' }),
      ]);
      expect(made(agent, 'unanswered')).toBe(false);
    });
  },
);
