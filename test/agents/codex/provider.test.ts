import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { codex } from '../../../src/agents/codex/definition.ts';
import type { CodexOptionsInput } from '../../../src/agents/codex/options.ts';
import { runCodex } from '../../../src/agents/codex/provider.ts';
import { findProcessesByMarker } from '../../../src/process/index.ts';
import { isTerminal, type CliMessage } from '../../../src/protocol/index.ts';
import {
  hasFunctionCallOutput,
  startFakeResponsesServer,
  userTexts,
  type FakeResponsesServer,
} from '../../support/fake-responses-server.ts';
import { collect, livePidsMatching } from '../../support/processes.ts';
import {
  codexBin,
  codexOptions,
  createCodexEnv,
  FAKE_KEY_ENV,
  FAKE_MODEL,
  userProviderConfig,
  type CodexEnv,
} from './codex-env.ts';
import { assistantText } from './transcripts.ts';
import { failure, terminalOf } from '../contract.ts';

let server: FakeResponsesServer;
let env: CodexEnv;

beforeAll(async () => {
  server = await startFakeResponsesServer();
  env = createCodexEnv();
});

afterAll(async () => {
  await server.close();
  env.cleanup();
});

function attempt(script: string, extra: Partial<CodexOptionsInput> = {}, on: CodexEnv = env): Promise<CliMessage[]> {
  return collect(runCodex(codexOptions(on, server.urlFor(script), extra)));
}

function threadOf(messages: CliMessage[]): string {
  const first = messages[0];
  if (first?.type !== 'session.started' && first?.type !== 'session.resumed')
    throw new Error(`no session message first: ${JSON.stringify(first)}`);
  return first.content.sessionId;
}

describe('runCodex with the real codex CLI against the fake Responses server', () => {
  it('a text answer is one whole assistant message, its reasoning a thought, after exactly one model request', async () => {
    const messages = await attempt('text');
    expect(messages.map((m) => m.type)).toEqual([
      'session.started',
      'assistant',
      'assistant.thought',
      'terminal.completed',
    ]);
    expect(assistantText(messages)).toBe('Hello from the fake model.');
    expect(terminalOf(messages)).toMatchObject({
      type: 'terminal.completed',
      content: { stopReason: 'stop', usage: { input: 42, output: 12 } },
    });
    expect(server.requestsFor('text')).toHaveLength(1);
  });

  it('the prompt reaches the model exactly as given, even when it looks like a codex flag', async () => {
    const prompt = '--dangerously-bypass-approvals-and-sandbox -m o3 resume --last';
    await attempt('text-plain', { prompt });
    expect(userTexts(server.requestsFor('text-plain').at(-1)!.body)).toContain(prompt);
  });

  it('a tool turn gives one tool.call and one tool.completed, then the answer', async () => {
    const messages = await attempt('tool');
    expect(messages.map((m) => m.type)).toEqual([
      'session.started',
      'tool.call',
      'tool.completed',
      'assistant',
      'terminal.completed',
    ]);
    expect(messages.find((m) => m.type === 'tool.completed')?.content).toMatchObject({
      result: { output: 'hi\n', exitCode: 0 },
    });
    expect(assistantText(messages)).toBe('The command printed: hi');
    expect(server.requestsFor('tool')).toHaveLength(2);
  });

  it("HTTP 500 is terminal.failed (server_error, Codex's canned text) after exactly one model request", async () => {
    const content = failure(await attempt('http500'));
    expect(content).toMatchObject({ category: 'server_error', exitCode: 1, promptRecorded: true });
    expect(content.agentError).toContain('high demand');
    expect(server.requestsFor('http500')).toHaveLength(1);
  });

  it("the user's own provider with Codex's retries ON still makes one request, and the user's config.toml is left untouched", async () => {
    const own = createCodexEnv({ config: userProviderConfig(server.urlFor('http503'), 4) });
    try {
      const before = readFileSync(join(own.userCodexHome, 'config.toml'), 'utf8');
      const { baseUrl: _baseUrl, envKey: _envKey, ...options } = codexOptions(own, server.urlFor('http503'));
      const content = failure(await collect(runCodex(options)));
      expect(content.category).toBe('server_error');
      expect(server.requestsFor('http503')).toHaveLength(1);
      expect(readFileSync(join(own.userCodexHome, 'config.toml'), 'utf8')).toBe(before);
    } finally {
      own.cleanup();
    }
  });

  it("Codex's built-in provider (no provider configured) is refused at startup: nothing runs", async () => {
    const before = server.requests.length;
    const { baseUrl: _baseUrl, envKey: _envKey, ...options } = codexOptions(env, server.urlFor('text'));
    const content = failure(await collect(runCodex(options)));
    expect(content.category).toBe('startup');
    expect(content.text).toContain('built-in');
    expect(server.requests.length).toBe(before);
  });

  it('read-only (the default) denies a write in the cwd; workspace-write allows it', async () => {
    const file = join(env.cwd, 'written.txt');
    const denied = await attempt('tool-write');
    expect(terminalOf(denied).type).toBe('terminal.completed');
    expect(existsSync(file)).toBe(false);
    const allowed = await attempt('tool-write', { sandbox: 'workspace-write' });
    expect(allowed.filter((m) => m.type === 'tool.completed')).toHaveLength(1);
    expect(existsSync(file)).toBe(true);
  });

  it.each([
    ['read-only', false],
    ['danger-full-access', false],
    ['danger-full-access', true],
  ] as const)(
    'cancel during a long tool (%s sandbox, setsid grandchild: %s): rejects with the AbortError, keeps what was yielded, leaves no process of the tree',
    async (sandbox, setsid) => {
      // Sleep lengths unique to this run: the orphan check must not see another run's sleeps.
      const seconds = 3000 + Math.floor(Math.random() * 6000);
      const cmd = setsid ? `setsid sleep ${seconds} & sleep ${seconds + 1}` : `sleep ${seconds}; echo done`;
      const script = `long-tool-${seconds}`;
      server.setScript(script, ({ body }) =>
        hasFunctionCallOutput(body)
          ? { text: 'Slept.' }
          : { functionCalls: [{ name: 'exec_command', arguments: { cmd } }] },
      );
      const controller = new AbortController();
      let marker = '';
      const seen: CliMessage[] = [];
      const run = (async () => {
        for await (const m of runCodex(codexOptions(env, server.urlFor(script), { sandbox }), {
          signal: controller.signal,
          onSpawn: (a) => (marker = a.marker),
        })) {
          seen.push(m);
          // The command runs once its item.started is out; give it a moment to reach `sleep`.
          if (m.type === 'tool.call') setTimeout(() => controller.abort(), 700);
        }
      })();
      await expect(run).rejects.toMatchObject({ name: 'AbortError' });
      expect(seen.some((m) => m.type === 'tool.call')).toBe(true);
      expect(seen.some(isTerminal)).toBe(false);
      expect(marker).not.toBe('');
      expect(await findProcessesByMarker(marker)).toEqual([]);
      expect(livePidsMatching(new RegExp(`sleep (${seconds}|${seconds + 1})\\b`))).toEqual([]);
    },
  );

  it('a model that never answers hits the idle timeout: category timeout, nothing left running', async () => {
    let marker = '';
    const content = failure(
      await collect(
        runCodex(codexOptions(env, server.urlFor('hang'), { idleTimeoutMs: 1500 }), {
          onSpawn: (a) => (marker = a.marker),
        }),
      ),
    );
    expect(content.category).toBe('timeout');
    expect(await findProcessesByMarker(marker)).toEqual([]);
  });

  it('a command that cannot start is a startup failure, not a throw', async () => {
    const content = failure(await attempt('text', { command: '/nonexistent/codex-binary' }));
    expect(content.category).toBe('startup');
    expect(content.text).toContain('/nonexistent/codex-binary');
  });

  it('invalid options are a startup failure naming the field', async () => {
    const content = failure(await attempt('text', { sandbox: 'everything' as never }));
    expect(content.category).toBe('startup');
    expect(content.text).toContain('sandbox');
  });

  it('an already-aborted signal rejects at once and starts nothing', async () => {
    const controller = new AbortController();
    controller.abort();
    const before = server.requests.length;
    await expect(
      runCodex(codexOptions(env, server.urlFor('text')), { signal: controller.signal }).next(),
    ).rejects.toMatchObject({ name: 'AbortError' });
    expect(server.requests.length).toBe(before);
  });

  it('a second attempt resumes the thread: session.resumed with the same id, the whole history sent', async () => {
    const first = await attempt('text-plain', { prompt: 'first prompt' });
    const id = threadOf(first);
    const second = await attempt('text-plain', { prompt: 'second prompt', session: { mode: 'resume', id } });
    expect(second[0]).toEqual({ type: 'session.resumed', content: { sessionId: id } });
    const users = userTexts(server.requestsFor('text-plain').at(-1)!.body);
    expect(users.filter((t) => t === 'first prompt' || t === 'second prompt')).toEqual([
      'first prompt',
      'second prompt',
    ]);
  });

  it('resuming a thread this host has no rollout for is a startup failure', async () => {
    const content = failure(
      await attempt('text-plain', { session: { mode: 'resume', id: '01a2294d-0000-7000-8000-000000000000' } }),
    );
    expect(content.category).toBe('startup');
    expect(content.text).toContain('no rollout found');
  });

  it('a thread moves to another host with its rollout (exportState / importState) and resumes there', async () => {
    const hostB = createCodexEnv();
    try {
      const optionsA = {
        baseUrl: server.urlFor('text-plain'),
        envKey: FAKE_KEY_ENV,
        model: FAKE_MODEL,
        command: codexBin,
        cwd: env.cwd,
        codexHome: env.userCodexHome,
        env: env.env,
      };
      const optionsB = { ...optionsA, cwd: hostB.cwd, codexHome: hostB.userCodexHome, env: hostB.env };
      const first = await collect(
        codex.run({ text: 'prompt on host A', resumeSessionId: null, options: optionsA }, {}),
      );
      const id = threadOf(first);
      const state = await codex.exportState!(optionsA, id);
      expect(state).not.toBeNull();
      await codex.importState!(optionsB, id, state!);
      const second = await collect(codex.run({ text: 'prompt on host B', resumeSessionId: id, options: optionsB }, {}));
      expect(second[0]).toEqual({ type: 'session.resumed', content: { sessionId: id } });
      expect(terminalOf(second).type).toBe('terminal.completed');
      const users = userTexts(server.requestsFor('text-plain').at(-1)!.body);
      expect(users.filter((t) => t.startsWith('prompt on host'))).toEqual(['prompt on host A', 'prompt on host B']);
    } finally {
      hostB.cleanup();
    }
  });

  it('a failed attempt leaves the prompt in the thread: resuming it with a continuation sends the prompt once', async () => {
    const failedRun = await attempt('http500', { prompt: 'the original prompt' });
    expect(failure(failedRun).promptRecorded).toBe(true);
    await attempt('text-plain', { prompt: 'please carry on', session: { mode: 'resume', id: threadOf(failedRun) } });
    const users = userTexts(server.requestsFor('text-plain').at(-1)!.body);
    expect(users.filter((t) => t === 'the original prompt')).toHaveLength(1);
    expect(users).toContain('please carry on');
  });

  it("sessiond's threads never land in the user's CODEX_HOME", () => {
    expect(existsSync(join(env.userCodexHome, 'sessions'))).toBe(false);
  });
});
