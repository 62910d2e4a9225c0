import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gemini } from '../../../src/agents/gemini/definition.ts';
import { managedGeminiHome } from '../../../src/agents/gemini/home.ts';
import type { GeminiOptionsInput } from '../../../src/agents/gemini/options.ts';
import { runGemini } from '../../../src/agents/gemini/provider.ts';
import type { RunContext } from '../../../src/agents/shared/run-attempt.ts';
import { findProcessesByMarker } from '../../../src/process/index.ts';
import type { CliMessage, MessageOf } from '../../../src/index.ts';
import {
  declaredTools,
  startFakeGeminiServer,
  userTexts,
  type FakeGeminiServer,
} from '../../support/fake-gemini-server.ts';
import { livePidsMatching } from '../../support/processes.ts';
import { createGeminiEnv, geminiBin, type GeminiEnv } from './gemini-env.ts';
import { assistantText } from './transcripts.ts';
import { failure, terminalOf } from '../contract.ts';

/** The user's own settings turn gemini's retries up: sessiond must switch them off without touching the file. */
const USER_SETTINGS = { general: { maxAttempts: 5, vimMode: true }, ui: { theme: 'GitHub' } };

const shell = (command: string) => ({ name: 'run_shell_command', args: { command, description: 'Run a command' } });

let server: FakeGeminiServer;
let env: GeminiEnv;

beforeAll(async () => {
  server = await startFakeGeminiServer();
  server.setScript('cancel-tool', {
    text: 'Sleeping.',
    functionCalls: [shell('setsid sleep 1021 & sleep 1022; echo done')],
  });
  server.setScript('cancel-tool-strict', {
    text: 'Sleeping.',
    functionCalls: [shell('setsid sleep 1023 & sleep 1024; echo done')],
  });
  env = createGeminiEnv({ serverUrl: server.url, userSettings: USER_SETTINGS });
});

afterAll(async () => {
  await server?.close();
  env?.cleanup();
});

function options(model: string, extra: Partial<GeminiOptionsInput> = {}): GeminiOptionsInput {
  return {
    prompt: 'Say hello',
    model,
    cwd: env.cwd,
    configDir: env.configDir,
    command: geminiBin,
    env: env.env,
    ...extra,
  };
}

async function attempt(
  model: string,
  extra: Partial<GeminiOptionsInput> = {},
  context: RunContext = {},
): Promise<CliMessage[]> {
  const out: CliMessage[] = [];
  for await (const message of runGemini(options(model, extra), context)) out.push(message);
  return out;
}

function sessionIdOf(messages: CliMessage[]): string {
  const first = messages[0];
  if (first?.type !== 'session.started' && first?.type !== 'session.resumed')
    throw new Error(`no session message: ${JSON.stringify(first)}`);
  return first.content.sessionId;
}

async function waitFor(check: () => boolean | Promise<boolean>, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('runGemini with the real gemini CLI against the fake Gemini API', () => {
  it('a text answer streams as exact assistant deltas and completes, after exactly one model request', async () => {
    const messages = await attempt('fake-text');
    expect(messages[0]?.type).toBe('session.started');
    expect(assistantText(messages)).toBe('Hello from the fake model.');
    expect(terminalOf(messages)).toMatchObject({
      type: 'terminal.completed',
      content: { stopReason: 'stop', usage: { input: 42, output: 12 } },
    });
    expect(server.requestsFor('fake-text')).toHaveLength(1);
    expect(server.requests.every((r) => r.action === 'streamGenerateContent')).toBe(true);
  });

  it("the user's settings are carried, gemini's retries forced off, and the user's file left untouched", () => {
    expect(JSON.parse(readFileSync(join(env.configDir, 'settings.json'), 'utf8'))).toEqual(USER_SETTINGS);
    const managed = JSON.parse(
      readFileSync(join(managedGeminiHome(env.configDir, env.stateDir), '.gemini', 'settings.json'), 'utf8'),
    ) as Record<string, Record<string, unknown>>;
    expect(managed.general).toEqual({
      maxAttempts: 1,
      vimMode: true,
      enableAutoUpdate: false,
      enableAutoUpdateNotification: false,
    });
    expect(managed.ui).toEqual({ theme: 'GitHub' });
    expect(managed.security).toMatchObject({
      auth: { selectedType: 'gemini-api-key' },
      environmentVariableRedaction: { allowed: ['SESSIOND_AGENT_MARKER'] },
    });
    // gemini's chats went to the managed home, not to the user's dir
    expect(existsSync(join(env.configDir, 'tmp'))).toBe(false);
  });

  it('the prompt reaches the model exactly as given, even when it looks like gemini flags', async () => {
    const prompt = '--help -p "x" --yolo\nsecond line';
    await attempt('fake-text', { prompt });
    expect(userTexts(server.requestsFor('fake-text').at(-1)!.body).at(-1)).toBe(prompt);
  });

  it('a tool turn in yolo mode: one tool.call, one tool.completed, then the answer, in two requests', async () => {
    const messages = await attempt('fake-tool', { approvalMode: 'yolo', prompt: 'Run echo hi' });
    expect(messages.filter((m) => m.type === 'tool.call')).toHaveLength(1);
    const done = messages.filter((m): m is MessageOf<'tool.completed'> => m.type === 'tool.completed');
    expect(done.map((m) => m.content.result)).toEqual(['hi']);
    expect(assistantText(messages)).toBe('I will run a command.The command printed: hi');
    expect(server.requestsFor('fake-tool')).toHaveLength(2);
    expect(declaredTools(server.requestsFor('fake-tool')[0]!.body)).toContain('run_shell_command');
  });

  it('the default approval mode offers no shell tool: the call fails as not registered and the turn completes', async () => {
    server.reset();
    const messages = await attempt('fake-tool', { prompt: 'Run echo hi' });
    expect(declaredTools(server.requestsFor('fake-tool')[0]!.body)).not.toContain('run_shell_command');
    const failed = messages.filter((m): m is MessageOf<'tool.failed'> => m.type === 'tool.failed');
    expect(failed.map((m) => (m.content.error as { type?: string }).type)).toEqual(['tool_not_registered']);
    expect(terminalOf(messages).type).toBe('terminal.completed');
  });

  it.each([
    ['fake-http500', 'server_error', 244],
    ['fake-http429', 'rate_limited', 173],
    ['fake-http401', 'auth', 145],
  ] as const)(
    '%s is terminal.failed (%s, exit %i) after exactly one request: gemini does not retry',
    async (model, category, exitCode) => {
      const before = server.requestsFor(model).length;
      const content = failure(await attempt(model));
      expect(content).toMatchObject({ category, exitCode, promptRecorded: false });
      expect(content.agentError).toMatch(/^\[API Error/);
      expect(server.requestsFor(model).length - before).toBe(1);
    },
  );

  it('no GEMINI_API_KEY is an auth failure (exit 41) before any request', async () => {
    const before = server.requests.length;
    const content = failure(await attempt('fake-text', { env: { ...env.env, GEMINI_API_KEY: '' } }));
    expect(content).toMatchObject({ category: 'auth', exitCode: 41 });
    expect(server.requests.length).toBe(before);
  });

  it.each([
    ['the auto router', { model: 'auto' }, 'model'],
    ['an empty prompt', { prompt: '  ' }, 'prompt'],
    ['an unknown approval mode', { approvalMode: 'plan' as never }, 'approvalMode'],
    ['a resume id that is not a UUID', { session: { mode: 'resume' as const, id: 'latest' } }, 'session.id'],
  ])('%s is a startup failure naming the field, and starts nothing', async (_what, extra, field) => {
    const before = server.requests.length;
    const content = failure(await attempt('fake-text', extra));
    expect(content.category).toBe('startup');
    expect(content.text).toContain(field);
    expect(server.requests.length).toBe(before);
  });

  it('a command that cannot start is terminal.failed of category startup, not a throw', async () => {
    const content = failure(await attempt('fake-text', { command: '/nonexistent/gemini-binary' }));
    expect(content.category).toBe('startup');
    expect(content.text).toContain('/nonexistent/gemini-binary');
  });

  it('a model that never answers hits the idle timeout: category timeout, nothing left running', async () => {
    let marker = '';
    const content = failure(
      await attempt('fake-hang', { idleTimeoutMs: 3000 }, { onSpawn: (a) => (marker = a.marker) }),
    );
    expect(content.category).toBe('timeout');
    expect(await findProcessesByMarker(marker)).toEqual([]);
  });

  it.each([
    ['cancel-tool', {}, /^sleep 102[12] $/],
    // GITHUB_SHA puts gemini's env sanitisation in strict mode: the marker must still reach the tools.
    ['cancel-tool-strict', { GITHUB_SHA: 'deadbeef' }, /^sleep 102[34] $/],
  ] as const)(
    'cancel during a long shell tool (%s): rejects with the AbortError, keeps what was yielded, and leaves no process behind',
    async (model, extraEnv, sleeps) => {
      const controller = new AbortController();
      let marker = '';
      const seen: CliMessage[] = [];
      let markedSleeps: number[] = [];
      const run = (async () => {
        for await (const m of runGemini(
          options(model, { approvalMode: 'yolo', prompt: 'Run it', env: { ...env.env, ...extraEnv } }),
          {
            signal: controller.signal,
            onSpawn: (a) => (marker = a.marker),
          },
        )) {
          seen.push(m);
          if (m.type === 'tool.call') {
            await waitFor(() => livePidsMatching(sleeps).length === 2, 'both sleeps to start');
            const marked = new Set((await findProcessesByMarker(marker)).map((p) => p.pid));
            markedSleeps = livePidsMatching(sleeps).filter((pid) => marked.has(pid));
            controller.abort();
          }
        }
      })();
      await expect(run).rejects.toMatchObject({ name: 'AbortError' });
      expect(markedSleeps).toHaveLength(2);
      expect(seen.some((m) => m.type === 'tool.call')).toBe(true);
      expect(seen.some((m) => m.type === 'terminal.completed' || m.type === 'terminal.failed')).toBe(false);
      expect(await findProcessesByMarker(marker)).toEqual([]);
      expect(livePidsMatching(sleeps)).toEqual([]);
    },
  );

  it('an already-aborted signal rejects at once and starts nothing', async () => {
    const controller = new AbortController();
    controller.abort();
    const before = server.requests.length;
    await expect(runGemini(options('fake-text'), { signal: controller.signal }).next()).rejects.toMatchObject({
      name: 'AbortError',
    });
    expect(server.requests.length).toBe(before);
  });

  it('a second attempt resumes the same gemini session: session.resumed, and the model sees the first turn', async () => {
    const id = sessionIdOf(await attempt('fake-text', { prompt: 'First turn' }));
    const second = await attempt('fake-text', { prompt: 'Second turn', session: { mode: 'resume', id } });
    expect(second[0]).toEqual({ type: 'session.resumed', content: { sessionId: id } });
    expect(terminalOf(second).type).toBe('terminal.completed');
    const texts = userTexts(server.requestsFor('fake-text').at(-1)!.body);
    expect(texts.slice(-2)).toEqual(['First turn', 'Second turn']);
  });

  it('resuming a session gemini does not have is a bad_request failure (exit 42), not a new session', async () => {
    const content = failure(
      await attempt('fake-text', { session: { mode: 'resume', id: '5d1ccf9e-0000-4000-8000-000000000000' } }),
    );
    expect(content).toMatchObject({ category: 'bad_request', exitCode: 42 });
  });

  it("the session's chat travels: exported from one host's state, imported into another's, resumed there", async () => {
    const request = (text: string, resumeSessionId: string | null, stateDir: string) => ({
      text,
      resumeSessionId,
      options: {
        model: 'fake-text',
        cwd: env.cwd,
        configDir: env.configDir,
        command: geminiBin,
        env: { ...env.env, SESSIOND_STATE_DIR: stateDir },
      },
    });
    const hostA = join(env.root, 'host-a');
    const hostB = join(env.root, 'host-b');
    const first: CliMessage[] = [];
    for await (const m of gemini.run(request('Turn on host A', null, hostA), {})) first.push(m);
    const id = sessionIdOf(first);
    const state = await gemini.exportState!(request('', id, hostA).options, id);
    expect(state).not.toBeNull();
    expect((JSON.parse(state!) as { version: number }).version).toBe(1);

    await gemini.importState!(request('', id, hostB).options, id, state!);
    const chats = join(managedGeminiHome(env.configDir, hostB), '.gemini', 'tmp');
    expect(
      readdirSync(chats, { recursive: true })
        .map(String)
        .some((f) => f.endsWith(`${id.slice(0, 8)}.jsonl`)),
    ).toBe(true);
    const second: CliMessage[] = [];
    for await (const m of gemini.run(request('Turn on host B', id, hostB), {})) second.push(m);
    expect(second[0]).toEqual({ type: 'session.resumed', content: { sessionId: id } });
    expect(userTexts(server.requestsFor('fake-text').at(-1)!.body).slice(-2)).toEqual([
      'Turn on host A',
      'Turn on host B',
    ]);
    // exporting again from host B carries both turns
    const again = await gemini.exportState!(request('', id, hostB).options, id);
    expect(again!.length).toBeGreaterThan(state!.length);
  });
});
