import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runPi } from '../../../src/agents/pi/provider.ts';
import type { PiOptionsInput } from '../../../src/agents/pi/options.ts';
import { findProcessesByMarker } from '../../../src/process/index.ts';
import { isTerminal, type CliMessage, type MessageOf } from '../../../src/protocol/index.ts';
import { startFakeModelServer, type FakeModelServer } from '../../support/fake-model-server.ts';
import { livePidsMatching } from '../../support/processes.ts';
import { createPiEnv, type PiEnv } from '../../support/pi-env.ts';
import { assistantText } from './transcripts.ts';
import { failure, terminalOf } from '../contract.ts';
import { piHostOptions } from '../../support/runtime.ts';

const USER_SETTINGS = {
  retry: { enabled: true, maxRetries: 3, provider: { maxRetries: 2 } },
  defaultThinkingLevel: 'low',
};

let server: FakeModelServer;
let env: PiEnv;
let stateDir: string;

beforeAll(async () => {
  server = await startFakeModelServer();
  // The user's own pi config turns pi's retries ON: sessiond must switch them off without touching it.
  env = createPiEnv({ serverUrl: server.url, settings: USER_SETTINGS });
  stateDir = mkdtempSync(join(tmpdir(), 'sessiond-state-'));
});

afterAll(async () => {
  await server.close();
  env.cleanup();
  rmSync(stateDir, { recursive: true, force: true });
});

function options(model: string, extra: Partial<PiOptionsInput> = {}): PiOptionsInput {
  return {
    prompt: 'Say hello. If asked, run echo hi with bash.',
    provider: 'fake',
    model,
    cwd: env.cwd,
    ...piHostOptions(env, stateDir),
    ...extra,
  };
}

async function attempt(model: string, extra: Partial<PiOptionsInput> = {}): Promise<CliMessage[]> {
  const out: CliMessage[] = [];
  for await (const message of runPi(options(model, extra))) out.push(message);
  return out;
}

describe('runPi with the real pi CLI against the fake model server', () => {
  it('a text answer streams as assistant deltas and completes, after exactly one model request', async () => {
    const messages = await attempt('text');
    expect(messages[0]?.type).toBe('session.started');
    expect(assistantText(messages)).toBe('Hello from the fake LLM.');
    expect(terminalOf(messages)).toMatchObject({ type: 'terminal.completed', content: { stopReason: 'stop' } });
    expect(server.requestsFor('text')).toHaveLength(1);
  });

  it('the prompt reaches the model exactly as given, even when it looks like a pi flag or @file', async () => {
    await attempt('text-burst', { prompt: '--help @/etc/passwd -p' });
    const body = server.requestsFor('text-burst').at(-1)!.body;
    const users = (body.messages ?? []).filter((m) => m.role === 'user');
    expect(JSON.stringify(users.at(-1)?.content)).toContain('--help @/etc/passwd -p');
  });

  it('thinking is released as assistant.thought after the text', async () => {
    const messages = await attempt('thinking', { thinking: 'high' });
    const thought = messages.find((m) => m.type === 'assistant.thought');
    expect(thought?.content).toEqual({ text: 'Let me think about it.' });
    expect(messages.indexOf(thought!)).toBeGreaterThan(messages.findLastIndex((m) => m.type === 'assistant'));
  });

  it('a tool turn gives one tool.call and one tool.completed, then the answer', async () => {
    const messages = await attempt('tool');
    expect(messages.filter((m) => m.type === 'tool.call')).toHaveLength(1);
    const done = messages.filter((m) => m.type === 'tool.completed');
    expect(done).toHaveLength(1);
    expect(JSON.stringify(done[0]!.content)).toContain('hi');
    expect(assistantText(messages)).toBe('The command printed: hi');
    expect(server.requestsFor('tool')).toHaveLength(2);
  });

  it('a tool that fails gives tool.failed and the turn still completes', async () => {
    const messages = await attempt('tool-fail');
    expect(messages.filter((m) => m.type === 'tool.failed')).toHaveLength(1);
    expect(terminalOf(messages).type).toBe('terminal.completed');
  });

  it('two tool calls in one message each get a call and one result', async () => {
    const messages = await attempt('two-tools');
    expect(messages.filter((m) => m.type === 'tool.call')).toHaveLength(2);
    expect(messages.filter((m) => m.type === 'tool.completed')).toHaveLength(2);
  });

  it.each([
    ['http401', 'auth'],
    ['http429', 'rate_limited'],
    ['http500', 'server_error'],
    ['http503', 'server_error'],
    ['midclose', 'network'],
  ] as const)(
    '%s is terminal.failed (%s) after exactly one model request: pi does not retry on its own',
    async (model, category) => {
      const before = server.requestsFor(model).length;
      const content = failure(await attempt(model));
      expect(content.category).toBe(category);
      expect(content.agentError).toBeTruthy();
      expect(server.requestsFor(model).length - before).toBe(1);
    },
  );

  it("the user's own settings.json (retries on) is left untouched", () => {
    expect(JSON.parse(readFileSync(join(env.agentDir, 'settings.json'), 'utf8'))).toEqual(USER_SETTINGS);
  });

  it("when a project's .pi/settings.json turns pi's retries back on, every retry is surfaced as agent.retry", async () => {
    const cwd = join(env.root, 'retrying-project');
    mkdirSync(join(cwd, '.pi'), { recursive: true });
    writeFileSync(
      join(cwd, '.pi', 'settings.json'),
      JSON.stringify({ retry: { enabled: true, maxRetries: 1, baseDelayMs: 10 } }),
    );
    const messages = await attempt('http502', { cwd });
    expect(messages.filter((m) => m.type === 'agent.retry').length).toBeGreaterThanOrEqual(1);
    expect(failure(messages).category).toBe('server_error');
  });

  it('a model that never answers hits the idle timeout: category timeout, nothing left running', async () => {
    let marker = '';
    const out: CliMessage[] = [];
    for await (const m of runPi(options('hang', { idleTimeoutMs: 1500 }), { onSpawn: (a) => (marker = a.marker) }))
      out.push(m);
    expect(failure(out).category).toBe('timeout');
    expect(await findProcessesByMarker(marker)).toEqual([]);
  });

  it("a prompt pi refuses (no model with a key: rpc mode's prompt answer says so) is terminal.failed naming pi's reason", async () => {
    const agentDir = mkdtempSync(join(env.root, 'empty-agent-'));
    const before = server.requests.length;
    let marker = '';
    const out: CliMessage[] = [];
    const input = { ...options('text'), agentDir };
    delete input.provider;
    delete input.model;
    for await (const m of runPi(input, { onSpawn: (a) => (marker = a.marker) })) out.push(m);
    const content = failure(out);
    expect(content.category).toBe('auth');
    expect(content.text).toContain('pi refused the prompt: No API key found');
    expect(server.requests.length).toBe(before);
    expect(await findProcessesByMarker(marker)).toEqual([]);
  });

  it('a command that cannot start is terminal.failed of category startup, not a throw', async () => {
    const content = failure(await attempt('text', { command: '/nonexistent/pi-binary' }));
    expect(content.category).toBe('startup');
    expect(content.text).toContain('/nonexistent/pi-binary');
  });

  it('invalid options are a startup failure naming the field', async () => {
    const content = failure(await attempt('text', { prompt: '   ' }));
    expect(content.category).toBe('startup');
    expect(content.text).toContain('prompt');
  });

  it.each(['long-tool-grandchild', 'long-tool-setsid'])(
    'cancel during a long bash tool (%s): rejects with the AbortError, keeps what was yielded, and leaves no process of the tree',
    async (model) => {
      const controller = new AbortController();
      let marker = '';
      const seen: CliMessage[] = [];
      const run = (async () => {
        for await (const m of runPi(options(model), {
          signal: controller.signal,
          onSpawn: (a) => (marker = a.marker),
        })) {
          seen.push(m);
          if (m.type === 'tool.update' && 'partialResult' in m.content) controller.abort();
          if (m.type === 'tool.call') setTimeout(() => controller.abort(), 700);
        }
      })();
      await expect(run).rejects.toMatchObject({ name: 'AbortError' });
      expect(seen.some((m) => m.type === 'tool.call')).toBe(true);
      expect(seen.some(isTerminal)).toBe(false);
      expect(await findProcessesByMarker(marker)).toEqual([]);
      expect(livePidsMatching(/sleep 100[1-4]/)).toEqual([]);
    },
  );

  it('an already-aborted signal rejects at once and starts nothing', async () => {
    const controller = new AbortController();
    controller.abort();
    const before = server.requests.length;
    await expect(runPi(options('text'), { signal: controller.signal }).next()).rejects.toMatchObject({
      name: 'AbortError',
    });
    expect(server.requests.length).toBe(before);
  });

  it('a second attempt resumes the same pi session: session.resumed with the same id', async () => {
    const first = await attempt('text');
    const id = (first[0] as MessageOf<'session.started'>).content.sessionId;
    const second = await attempt('text', { session: { mode: 'resume', id }, prompt: 'and again' });
    expect(second[0]).toEqual({ type: 'session.resumed', content: { sessionId: id } });
    const body = server.requestsFor('text').at(-1)!.body;
    expect((body.messages ?? []).filter((m) => m.role === 'user')).toHaveLength(2);
  });
});
