import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claudeCode } from '../../../src/agents/claude-code/definition.ts';
import type { ClaudeCodeOptionsInput } from '../../../src/agents/claude-code/options.ts';
import { runClaudeCode } from '../../../src/agents/claude-code/provider.ts';
import { findProcessesByMarker } from '../../../src/process/index.ts';
import { isTerminal, type CliMessage, type MessageOf } from '../../../src/protocol/index.ts';
import { claudeBin, createClaudeEnv, type ClaudeEnv } from '../../support/claude-code-env.ts';
import {
  DEFAULT_TEXT,
  startFakeAnthropicServer,
  type FakeAnthropicServer,
} from '../../support/fake-anthropic-server.ts';
import { collect, livePidsMatching } from '../../support/processes.ts';
import { assistantText } from './transcripts.ts';
import { failure, terminalOf } from '../contract.ts';

let server: FakeAnthropicServer;
let env: ClaudeEnv;

beforeAll(async () => {
  // Not skipped when missing: CI installs the pinned CLIs (scripts/install-agent-clis.sh), as for Codex and Gemini.
  if (!existsSync(claudeBin))
    throw new Error(`${claudeBin} not found: run scripts/install-agent-clis.sh (npm test does)`);
  server = await startFakeAnthropicServer();
  env = createClaudeEnv(server.url);
});

afterAll(async () => {
  await server.close();
  env.cleanup();
});

function options(model: string, extra: Partial<ClaudeCodeOptionsInput> = {}): ClaudeCodeOptionsInput {
  return { prompt: 'Say hello. If asked, run echo hi.', model, ...env.options, ...extra };
}

const attempt = (model: string, extra: Partial<ClaudeCodeOptionsInput> = {}): Promise<CliMessage[]> =>
  collect(runClaudeCode(options(model, extra)));

function sessionIdOf(messages: CliMessage[]): string {
  const started = messages.find((m) => m.type === 'session.started' || m.type === 'session.resumed');
  if (started === undefined) throw new Error('no session event');
  return (started as MessageOf<'session.started'>).content.sessionId;
}

/** Every text the user sent in the last request for `model`. */
function userTexts(model: string): string {
  return JSON.stringify((server.requestsFor(model).at(-1)?.body.messages ?? []).filter((m) => m.role === 'user'));
}

describe('runClaudeCode with the real Claude Code CLI against the fake Anthropic server', () => {
  it('a text answer streams as assistant deltas, thinking comes after it, and it completes after exactly one model request', async () => {
    const before = server.requestsFor('text').length;
    const messages = await attempt('text');
    expect(messages[0]?.type).toBe('session.started');
    expect(messages.filter((m) => m.type === 'assistant').length).toBeGreaterThan(1);
    expect(assistantText(messages)).toBe(DEFAULT_TEXT);
    const thought = messages.find((m) => m.type === 'assistant.thought');
    expect(thought?.content).toEqual({ text: 'The user wants a greeting. I will answer briefly.' });
    expect(messages.indexOf(thought!)).toBeGreaterThan(messages.findLastIndex((m) => m.type === 'assistant'));
    expect(terminalOf(messages)).toMatchObject({ type: 'terminal.completed', content: { stopReason: 'end_turn' } });
    expect(server.requestsFor('text').length - before).toBe(1);
  });

  it('without partial messages the text arrives whole, once', async () => {
    const messages = await attempt('text-plain', { includePartialMessages: false });
    expect(messages.filter((m) => m.type === 'assistant').map((m) => m.content)).toEqual([{ text: DEFAULT_TEXT }]);
  });

  it('a tool turn gives one tool.call and one tool.completed, then the answer, in two model requests', async () => {
    const before = server.requestsFor('tool').length;
    const messages = await attempt('tool');
    expect(messages.filter((m) => m.type === 'tool.call').map((m) => m.content)).toEqual([
      { toolCallId: 'toolu_fake_1_0', name: 'Bash', arguments: { command: 'echo hi', description: 'Run a command' } },
    ]);
    const done = messages.filter((m) => m.type === 'tool.completed');
    expect(done).toHaveLength(1);
    expect(done[0]!.content).toMatchObject({ result: { content: 'hi' } });
    expect(assistantText(messages)).toBe('I will run a command.The command printed: hi');
    expect(terminalOf(messages).type).toBe('terminal.completed');
    expect(server.requestsFor('tool').length - before).toBe(2);
  });

  it('HTTP 500 is terminal.failed server_error after exactly one model request (retries off), with the prompt recorded', async () => {
    const before = server.requestsFor('http500').length;
    const content = failure(await attempt('http500'));
    expect(content).toMatchObject({ category: 'server_error', exitCode: 1, promptRecorded: true });
    expect(content.agentError).toContain('500');
    expect(server.requestsFor('http500').length - before).toBe(1);
  });

  it('the prompt reaches the model exactly as given: not a flag, no @file expansion', async () => {
    await attempt('text-plain', { prompt: '--help @/etc/passwd -p' });
    const users = userTexts('text-plain');
    expect(users).toContain('--help @/etc/passwd -p');
    expect(users).not.toContain('root:');
  });

  it('cancel during a long tool (background and setsid children): rejects with the AbortError, keeps what was yielded, leaves no process', async () => {
    const controller = new AbortController();
    let marker = '';
    let toolRan = false;
    const seen: CliMessage[] = [];
    // Abort once both of the tool's timers run (one in the background, one in its own session).
    const abortWhenToolRuns = async (): Promise<void> => {
      for (let i = 0; i < 100 && !toolRan; i++) {
        toolRan = livePidsMatching(/106[23]e3/).length >= 2;
        if (!toolRan) await new Promise((r) => setTimeout(r, 100));
      }
      controller.abort();
    };
    const run = (async () => {
      for await (const m of runClaudeCode(options('long-tool-bg', { allowedTools: ['Bash'] }), {
        signal: controller.signal,
        onSpawn: (a) => (marker = a.marker),
      })) {
        seen.push(m);
        if (m.type === 'tool.call') void abortWhenToolRuns();
      }
    })();
    await expect(run).rejects.toMatchObject({ name: 'AbortError' });
    expect(toolRan).toBe(true);
    expect(seen.some((m) => m.type === 'tool.call')).toBe(true);
    expect(seen.some(isTerminal)).toBe(false);
    expect(marker).not.toBe('');
    expect(await findProcessesByMarker(marker)).toEqual([]);
    expect(livePidsMatching(/106[1-3]e3/)).toEqual([]);
  });

  it('a model that never answers hits the idle timeout: category timeout, nothing left running', async () => {
    let marker = '';
    const messages = await collect(
      runClaudeCode(options('hang', { idleTimeoutMs: 1500 }), { onSpawn: (a) => (marker = a.marker) }),
    );
    expect(failure(messages).category).toBe('timeout');
    expect(await findProcessesByMarker(marker)).toEqual([]);
  });

  it('a second attempt resumes the same session: session.resumed with the same id, both prompts sent', async () => {
    const id = sessionIdOf(await attempt('text', { prompt: 'first prompt' }));
    const second = await attempt('text', { prompt: 'second prompt', session: { mode: 'resume', id } });
    expect(second[0]).toEqual({ type: 'session.resumed', content: { sessionId: id } });
    const users = userTexts('text');
    expect(users).toContain('first prompt');
    expect(users).toContain('second prompt');
  });

  it("the session's state travels to another host (fresh config dir, other cwd) and resumes there", async () => {
    const other = createClaudeEnv(server.url);
    try {
      const request = (text: string, resumeSessionId: string | null, on: ClaudeEnv) => ({
        text,
        resumeSessionId,
        options: { ...on.options, model: 'text-plain' },
      });
      const id = sessionIdOf(await collect(claudeCode.run(request('prompt on host one', null, env), {})));
      const state = await claudeCode.exportState!({ ...env.options }, id);
      expect(state).not.toBeNull();
      await claudeCode.importState!({ ...other.options }, id, state!);
      const second = await collect(claudeCode.run(request('prompt on host two', id, other), {}));
      expect(second[0]).toEqual({ type: 'session.resumed', content: { sessionId: id } });
      expect(terminalOf(second).type).toBe('terminal.completed');
      const users = userTexts('text-plain');
      expect(users).toContain('prompt on host one');
      expect(users).toContain('prompt on host two');
    } finally {
      other.cleanup();
    }
  });

  it('resuming a session this host does not have is a startup failure', async () => {
    const content = failure(
      await attempt('text', { session: { mode: 'resume', id: '11111111-2222-4333-8444-555555555555' } }),
    );
    expect(content.category).toBe('startup');
    expect(content.text).toContain('No conversation found');
  });

  it.skipIf(process.getuid?.() !== 0)(
    'bypassPermissions as root without IS_SANDBOX=1 fails at once as startup, before any spawn',
    async () => {
      const before = server.requests.length;
      const content = failure(await attempt('text', { permissionMode: 'bypassPermissions' }));
      expect(content.category).toBe('startup');
      expect(content.text).toContain('IS_SANDBOX=1');
      expect(server.requests.length).toBe(before);
    },
  );

  it('a command that cannot start and invalid options are startup failures, not throws', async () => {
    expect(failure(await attempt('text', { command: '/nonexistent/claude' })).category).toBe('startup');
    const content = failure(await attempt('text', { prompt: '   ' }));
    expect(content.category).toBe('startup');
    expect(content.text).toContain('prompt');
  });

  it('an already-aborted signal rejects at once and starts nothing', async () => {
    const controller = new AbortController();
    controller.abort();
    const before = server.requests.length;
    await expect(runClaudeCode(options('text'), { signal: controller.signal }).next()).rejects.toMatchObject({
      name: 'AbortError',
    });
    expect(server.requests.length).toBe(before);
  });
});
