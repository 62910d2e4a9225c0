import { tmpdir } from 'node:os';
import { afterAll, describe, expect, it } from 'vitest';
import { deploymentPolicy } from '../../../src/runtime/deployment-policy.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import {
  startFakeAnthropicServer,
  type FakeAnthropicServer,
  type ScriptContext,
} from '../../support/fake-anthropic-server.ts';
import { agentRecords, assistantText, turnEnded, useRuntimeSuite, type RuntimeSuite } from '../../support/runtime.ts';
import { claudeAcpEnv, OPENCODE_TITLE_MODEL, opencodeEnv, qwenEnv, type AcpCliEnv } from './acp-clis.ts';

/**
 * `acp:claude` (the real claude-agent-acp 0.101.0), `acp:opencode` (the real opencode 1.18.33
 * acp) and `acp:qwen` (the real qwen 0.24.4 --acp) through the durable runtime: a 500 from the
 * API, then success. (acp:gemini's: gemini-acp-runtime.test.ts.)
 */
let suite: RuntimeSuite;
let anthropic: FakeAnthropicServer;
let claude: AcpCliEnv;
let opencode: AcpCliEnv;
let qwen: AcpCliEnv;
let runtime: Runtime;

/** claude-agent-acp asks the same model for the session's title: those requests are answered apart and not counted. */
const isTitleRequest = (ctx: ScriptContext) => JSON.stringify(ctx.body.messages).includes('Write the title');
let claudeTurnRequests = 0;

useRuntimeSuite(
  'acp-clis-runtime',
  {
    scripts: {
      'oc-flaky': [{ status: 500 }, { text: ['Recovered', ' after a 500.'] }],
      'q-flaky': [{ status: 500 }, { text: ['Recovered', ' after a 500.'] }],
      [OPENCODE_TITLE_MODEL]: { text: 'A title' },
    },
  },
  async (s) => {
    suite = s;
    anthropic = await startFakeAnthropicServer();
    anthropic.setScript('cc-flaky', (ctx) => {
      if (isTitleRequest(ctx)) return { text: 'A title' };
      claudeTurnRequests += 1;
      return claudeTurnRequests === 1 ? { status: 500 } : { text: ['Recovered', ' after a 500.'] };
    });
    claude = claudeAcpEnv(anthropic.url);
    opencode = opencodeEnv(`${s.server.url}/v1`, ['oc-flaky']);
    qwen = qwenEnv(`${s.server.url}/v1`);
    const operator = {
      'acp:claude': claude.agent('cc-flaky'),
      'acp:opencode': opencode.agent('oc-flaky'),
      'acp:qwen': qwen.agent('q-flaky'),
    };
    const policy = deploymentPolicy({ workspace: tmpdir(), agents: operator });
    runtime = new Runtime({ connect: s.h.connect, prefix: s.h.prefix, policy });
    await s.h.startWorker({ agentOptions: operator, policy });
  },
);
afterAll(async () => {
  await runtime?.close();
  await anthropic?.close();
  claude?.cleanup();
  opencode?.cleanup();
  qwen?.cleanup();
});

// Budgets for a loaded host, not timing assertions.
describe('ACP agents on their real CLIs in the durable runtime', { timeout: 240_000 }, () => {
  it('acp:claude: a 500, then success: the session machine retries once, each attempt one request, the turn completes', async () => {
    const { sessionId } = await runtime.enqueue({
      prompt: 'Say hello',
      options: { agent: 'acp:claude', cwd: claude.cwd },
      retryPolicy: { maxAttempts: 3, initialDelayMs: 0 },
    });
    const view = await turnEnded(runtime, sessionId, 1, 120_000);
    expect(view.state).toBe('completed');
    const messages = await runtime.readMessages(sessionId);
    expect(
      messages.filter((m) => m.type === 'terminal.failed').map((m) => (m.content as { category: string }).category),
    ).toEqual(['server_error']);
    // claude-agent-acp also sends the API error's text as a reply chunk of the failed attempt.
    expect(assistantText(messages.filter((m) => m.attempt === 2))).toBe('Recovered after a 500.');
    expect(assistantText(messages.filter((m) => m.attempt === 1))).toMatch(/^API Error: 500\b/);
    expect(claudeTurnRequests).toBe(2);
    expect(await agentRecords(sessionId)).toEqual([]);
  });

  it('acp:opencode: a 500, then success: OpenCode retries by itself (no knob turns it off, nothing says so over ACP), so the turn completes in one attempt with two requests and its agent.retry', async () => {
    const { sessionId } = await runtime.enqueue({
      prompt: 'Say hello',
      options: { agent: 'acp:opencode', cwd: opencode.cwd },
      retryPolicy: { maxAttempts: 3, initialDelayMs: 0 },
    });
    const view = await turnEnded(runtime, sessionId, 1, 120_000);
    expect(view.state).toBe('completed');
    const messages = await runtime.readMessages(sessionId);
    expect(messages.filter((m) => m.type === 'terminal.failed')).toEqual([]);
    expect(messages.filter((m) => m.type === 'terminal.completed')).toHaveLength(1);
    expect(assistantText(messages)).toBe('Recovered after a 500.');
    expect(suite.server.requestsFor('oc-flaky')).toHaveLength(2);
    // Its retry, which only its log records, is agent.retry in the log.
    expect(messages.filter((m) => m.type === 'agent.retry').map((m) => m.content)).toEqual([
      { phase: 'start', attempt: 1, errorText: expect.stringContaining('internal server error') },
      { phase: 'end', success: true },
    ]);
    expect(await agentRecords(sessionId)).toEqual([]);
  });

  it('acp:qwen: a 500, then success: Qwen Code retries by itself (no knob turns it off), so one attempt with two requests; its retry, which only its chat file records, is agent.retry in the log', async () => {
    const { sessionId } = await runtime.enqueue({
      prompt: 'Say hello',
      options: { agent: 'acp:qwen', cwd: qwen.cwd },
      retryPolicy: { maxAttempts: 3, initialDelayMs: 0 },
    });
    const view = await turnEnded(runtime, sessionId, 1, 120_000);
    expect(view.state).toBe('completed');
    const messages = await runtime.readMessages(sessionId);
    expect(messages.filter((m) => m.type === 'terminal.failed')).toEqual([]);
    expect(assistantText(messages)).toBe('Recovered after a 500.');
    expect(suite.server.requestsFor('q-flaky')).toHaveLength(2);
    expect(messages.filter((m) => m.type === 'agent.retry').map((m) => m.content)).toEqual([
      { phase: 'start', attempt: 1, errorText: expect.stringContaining('500') },
      { phase: 'end', success: true },
    ]);
    expect(messages.every((m) => m.attempt === 1)).toBe(true);
    expect(await agentRecords(sessionId)).toEqual([]);
  });
});
