import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { deploymentPolicy } from '../../src/runtime/deployment-policy.ts';
import { internals } from '../../src/runtime/internals.ts';
import { markerScope, reapOrphans } from '../../src/runtime/orphans.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import { claudeBin, FAKE_ANTHROPIC_KEY } from '../support/claude-code-env.ts';
import { startFakeAnthropicServer, type FakeAnthropicServer } from '../support/fake-anthropic-server.ts';
import { startFakeGeminiServer, type FakeGeminiServer } from '../support/fake-gemini-server.ts';
import { startFakeResponsesServer, type FakeResponsesServer } from '../support/fake-responses-server.ts';
import { turnEnded, until, useRuntimeSuite, type Harness } from '../support/runtime.ts';
import {
  killAllWorkerProcesses,
  startWorkerProcess,
  type WorkerProcess,
  type WorkerProcessOptions,
  workspaceHost,
} from '../support/worker-process.ts';
import { codexBin, FAKE_KEY, FAKE_KEY_ENV, FAKE_MODEL } from './codex/codex-env.ts';
import { FAKE_API_KEY, geminiBin, RECORDING_SETTINGS } from './gemini/gemini-env.ts';
import type { PiEnv } from '../support/pi-env.ts';

/**
 * Workspaces with the real Claude Code, Codex and Gemini CLIs and an ACP agent (the real `gemini --acp`),
 * each against its fake model API on 127.0.0.1, through two `sessiond worker` processes standing for two
 * hosts (separate state dirs, agent homes and workspace roots; shared Redis and a bare-repository store):
 * (a) turn 1 on host A writes a file through the agent's shell tool; turn 2 on host B sees it and extends
 * it, in the conversation of turn 1 (acp:gemini: in a new conversation, gemini --acp cannot load one);
 * (b) turn 3 runs a tool that completes, then one that appends to a file and sleeps, and is cancelled:
 * the copy holds turns 1 and 2's files and the completed tool's file where the agent's tool calls are
 * recorded as they complete (`stateAfterTool`: Claude Code, Codex, Gemini; acp:gemini records nothing
 * between an attempt's start and its completed end), never the append; turn 4's conversation, on the same
 * host, holds what the files hold and never the cut-short call, though the agent's own files on that host had it.
 */

type AgentCase = 'claude-code' | 'codex' | 'gemini' | 'acp:gemini';
const AGENTS: readonly AgentCase[] = ['claude-code', 'codex', 'gemini', 'acp:gemini'];
const CLAUDE_MODEL = 'ws-claude';
const GEMINI_MODEL = 'ws-gemini';
const ACP_MODEL = 'ws-acp';
const CODEX_SCRIPT = 'ws-codex';

/** The commands each step of a conversation runs, one tool call each, in order: prompt `STEP k: …` asks for COMMANDS[k]. */
const COMMANDS: Record<number, string[]> = {
  1: ['echo one > a.txt'],
  2: ['cat a.txt > b.txt; echo two >> b.txt'],
  // A tool that completes, then one that appends and is still running when the turn is cancelled.
  3: ['echo three > d.txt', 'echo half >> c.txt; sleep 600'],
  4: ['ls > list.txt'],
};
const prompt = (k: number): string => `STEP ${k}: ${COMMANDS[k]?.join(' THEN ')}`;

/**
 * What the fake model answers, whatever the agent: the request's latest step (its highest `STEP k`)
 * gets its next command, run through the agent's shell tool and followed by `printf 'ok<k>-<i>.'`;
 * once the request holds the output of every command of the step (their results), a text. Null:
 * not a request of a turn. `paceMs`: a step's later command comes slowly (the delay between the
 * response's events), as from a real model: a tool batch is recorded only if the agent has not asked
 * for its next tools by the time sessiond holds it still, which an instant fake model could race.
 */
function nextStep(body: unknown): { command: string; paceMs?: number } | { text: string } | null {
  const json = JSON.stringify(body);
  const steps = [...json.matchAll(/STEP (\d+):/g)].map((m) => Number(m[1]));
  if (steps.length === 0) return null;
  const k = Math.max(...steps);
  const commands = COMMANDS[k] ?? [];
  const next = commands.findIndex((_, i) => !json.includes(`ok${k}-${i}.`));
  if (next === -1) return { text: `Step ${k} done.` };
  return { command: `${commands[next]}; printf 'ok%s.' ${k}-${next}`, ...(next > 0 ? { paceMs: 400 } : {}) };
}

let h: Harness;
let env: PiEnv;
let runtime: Runtime;
let anthropic: FakeAnthropicServer;
let responses: FakeResponsesServer;
let geminiApi: FakeGeminiServer;
let store: string;
let redisUrl = '';
const hosts: Record<'a' | 'b', string> = { a: '', b: '' };

/** The operator's options of each agent on one host: its own homes and state under the host's dir. */
function agentOptions(dir: string): Record<string, Record<string, unknown>> {
  const home = join(dir, 'home');
  const cliHome = join(dir, 'gemini-cli-home');
  mkdirSync(join(home, '.gemini'), { recursive: true });
  mkdirSync(join(home, '.codex'), { recursive: true });
  mkdirSync(join(cliHome, '.gemini'), { recursive: true });
  writeFileSync(join(home, '.codex', 'config.toml'), `model = "${FAKE_MODEL}"\n`);
  writeFileSync(join(cliHome, '.gemini', 'settings.json'), JSON.stringify(RECORDING_SETTINGS));
  const base = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, LANG: 'C.UTF-8', TMPDIR: tmpdir() };
  const gemini = { ...base, GEMINI_API_KEY: FAKE_API_KEY, GOOGLE_GEMINI_BASE_URL: geminiApi.url };
  return {
    'claude-code': {
      command: claudeBin,
      configDir: join(dir, 'claude-config'),
      tmpDir: join(dir, 'claude-tmp'),
      allowedTools: ['Bash'],
      env: { ...base, ANTHROPIC_BASE_URL: anthropic.url, ANTHROPIC_API_KEY: FAKE_ANTHROPIC_KEY },
    },
    codex: {
      command: codexBin,
      codexHome: join(home, '.codex'),
      baseUrl: responses.urlFor(CODEX_SCRIPT),
      envKey: FAKE_KEY_ENV,
      // Codex's own sandbox lets its tools write the workspace; in sessiond's bwrap sandbox it cannot nest.
      sandbox: process.env.SESSIOND_SANDBOX === 'bwrap' ? 'danger-full-access' : 'workspace-write',
      env: { ...base, SESSIOND_STATE_DIR: dir, [FAKE_KEY_ENV]: FAKE_KEY },
    },
    gemini: {
      command: geminiBin,
      configDir: join(home, '.gemini'),
      approvalMode: 'yolo',
      env: { ...gemini, SESSIOND_STATE_DIR: dir },
    },
    'acp:gemini': {
      command: geminiBin,
      args: ['--acp', '--model', ACP_MODEL, '--skip-trust', '--yolo'],
      env: { ...gemini, GEMINI_CLI_HOME: cliHome, GEMINI_CLI_NO_RELAUNCH: 'true' },
    },
  };
}

function host(name: 'a' | 'b'): WorkerProcessOptions {
  const dir = hosts[name];
  return workspaceHost({ redisUrl, prefix: h.prefix, env, dir, store, agents: agentOptions(dir), fastTakeover: false });
}

async function stop(worker: WorkerProcess): Promise<void> {
  worker.kill('SIGTERM');
  expect(await worker.exited, worker.output()).toEqual({ code: 0, signal: null });
}

/** The requests each agent's fake model got, as JSON, for its latest step `k`. */
function requestsOf(agent: AgentCase, k: number): string[] {
  const bodies: unknown[] =
    agent === 'claude-code'
      ? anthropic.requestsFor(CLAUDE_MODEL).map((r) => r.body)
      : agent === 'codex'
        ? responses.requestsFor(CODEX_SCRIPT).map((r) => r.body)
        : geminiApi.requestsFor(agent === 'gemini' ? GEMINI_MODEL : ACP_MODEL).map((r) => r.body);
  return bodies
    .map((body) => JSON.stringify(body))
    .filter((json) => {
      const steps = [...json.matchAll(/STEP (\d+):/g)].map((m) => Number(m[1]));
      return steps.length > 0 && Math.max(...steps) === k;
    });
}

const callerOptions = (agent: AgentCase): Record<string, unknown> => {
  switch (agent) {
    case 'claude-code':
      return { agent, model: CLAUDE_MODEL };
    case 'codex':
      return { agent, model: FAKE_MODEL };
    case 'gemini':
      return { agent, model: GEMINI_MODEL };
    case 'acp:gemini':
      return { agent };
  }
};

useRuntimeSuite(
  'workspaces-agents',
  {
    cleanup: async () => {
      await killAllWorkerProcesses();
      if (h !== undefined) await reapOrphans(markerScope(internals(h.runtime).keys.prefix));
    },
  },
  async (s) => {
    for (const bin of [claudeBin, codexBin, geminiBin])
      if (!existsSync(bin)) throw new Error(`${bin} not found: run scripts/install-agent-clis.sh`);
    ({ h, env } = s);
    redisUrl = s.redis.url;
    [anthropic, responses, geminiApi] = await Promise.all([
      startFakeAnthropicServer(),
      startFakeResponsesServer(),
      startFakeGeminiServer(),
    ]);
    anthropic.setScript(CLAUDE_MODEL, ({ body }) => {
      const step = nextStep(body);
      if (step === null || 'text' in step) return { text: step?.text ?? 'Hello.' };
      return {
        toolUses: [{ name: 'Bash', input: { command: step.command, description: 'Run a command' } }],
        ...(step.paceMs === undefined ? {} : { chunkDelayMs: step.paceMs }),
      };
    });
    responses.setScript(CODEX_SCRIPT, ({ body }) => {
      const step = nextStep(body);
      if (step === null || 'text' in step) return { text: step?.text ?? 'Hello.' };
      return {
        functionCalls: [{ name: 'exec_command', arguments: { cmd: step.command } }],
        ...(step.paceMs === undefined ? {} : { eventDelayMs: step.paceMs }),
      };
    });
    for (const model of [GEMINI_MODEL, ACP_MODEL])
      geminiApi.setScript(model, ({ body }) => {
        const step = nextStep(body);
        if (step === null || 'text' in step) return { text: step?.text ?? 'Hello.' };
        return {
          functionCalls: [{ name: 'run_shell_command', args: { command: step.command, description: 'Run' } }],
          ...(step.paceMs === undefined ? {} : { chunkDelayMs: step.paceMs }),
        };
      });
    store = join(s.tempDir('store'), 'store.git');
    hosts.a = s.tempDir('host-a');
    hosts.b = s.tempDir('host-b');
    const policy = deploymentPolicy({ workspace: tmpdir(), agents: agentOptions(hosts.a) });
    runtime = new Runtime({ connect: s.h.connect, prefix: s.h.prefix, policy });
  },
);
// A test that failed midway leaves its workers running: the next agent's test must not find them.
afterEach(() => killAllWorkerProcesses());
afterAll(async () => {
  await runtime?.close();
  await Promise.all([anthropic?.close(), responses?.close(), geminiApi?.close()]);
});

describe.each(AGENTS)('workspaces with %s across two hosts', (agent) => {
  it('turn 1 on host A, turn 2 on host B extends its file; a cancel mid-tool leaves nothing of that tool and keeps the completed one', async () => {
    const copy = (name: 'a' | 'b', sessionId: string) => join(hosts[name], 'workspaces', sessionId);
    let a: WorkerProcess | null = await startWorkerProcess(host('a'));
    const { sessionId } = await runtime.enqueue({ prompt: prompt(1), options: callerOptions(agent) });
    expect((await turnEnded(runtime, sessionId, 1, 120_000)).state).toBe('completed');
    const tools = (await runtime.readMessages(sessionId)).filter((m) => m.type.startsWith('tool.'));
    expect(
      tools.map((m) => m.type),
      JSON.stringify(tools),
    ).toEqual(['tool.call', 'tool.completed']);
    expect(readFileSync(join(copy('a', sessionId), 'a.txt'), 'utf8')).toBe('one\n');
    await stop(a);
    a = null;

    // (a) Host B: the files of turn 1 restored from the store, the agent's conversation resumed.
    const b = await startWorkerProcess(host('b'));
    await runtime.enqueue({ sessionId, prompt: prompt(2) });
    expect((await turnEnded(runtime, sessionId, 2, 120_000)).state).toBe('completed');
    expect(readFileSync(join(copy('b', sessionId), 'b.txt'), 'utf8')).toBe('one\ntwo\n');
    const turn2 = requestsOf(agent, 2);
    expect(turn2.length).toBeGreaterThan(0);
    expect(turn2.map((json) => json.includes('ok1-0.'))).toEqual(turn2.map(() => agent !== 'acp:gemini'));
    // gemini 0.61 --acp cannot load a session (src/agents/acp/turn.ts): each of its turns starts a new one.
    const resumed = (await runtime.readMessages(sessionId)).filter((m) => m.type === 'session.resumed');
    expect(resumed.length).toBe(agent === 'acp:gemini' ? 0 : 1);

    // (b) Turn 3: a first tool completes, the second appends and sleeps; the turn is cancelled. The append is gone;
    // turns 1 and 2's files stay. Claude Code's, Codex's and Gemini's tool calls are recorded as they complete
    // (stateAfterTool): the first tool's file stays too. acp:gemini records nothing between an attempt's start and
    // its completed end: it goes.
    const keeps = agent !== 'acp:gemini';
    await runtime.enqueue({ sessionId, prompt: prompt(3) });
    await until(async () => existsSync(join(copy('b', sessionId), 'c.txt')), 120_000, 'the tool to append on host B');
    expect(readFileSync(join(copy('b', sessionId), 'd.txt'), 'utf8')).toBe('three\n');
    await runtime.cancel(sessionId, 'stop the tool');
    expect((await turnEnded(runtime, sessionId, 3, 120_000)).state).toBe('cancelled');
    const kept = keeps ? ['d.txt'] : [];
    expect(readdirSync(copy('b', sessionId)).sort()).toEqual(['.git', 'a.txt', 'b.txt', ...kept]);
    expect(readFileSync(join(copy('b', sessionId), 'b.txt'), 'utf8')).toBe('one\ntwo\n');

    // The next turn, on the same host: the files as turn 3 left them, and a conversation that holds turn 2's tool
    // call, turn 3's first one where its file was kept, and never the cut-short one.
    await runtime.enqueue({ sessionId, prompt: prompt(4) });
    expect((await turnEnded(runtime, sessionId, 4, 120_000)).state).toBe('completed');
    const listed = ['a.txt', 'b.txt', ...kept, 'list.txt'];
    expect(readFileSync(join(copy('b', sessionId), 'list.txt'), 'utf8')).toBe(`${listed.join('\n')}\n`);
    // Nothing of the agent's own is left in the workspace (Codex's sandbox mounts empty read-only .agents, .aws and
    // .codex over it while it runs: they are gone once it has ended).
    expect(readdirSync(copy('b', sessionId)).sort()).toEqual(['.git', ...listed].sort());
    const turn4 = requestsOf(agent, 4);
    expect(turn4.length).toBeGreaterThan(0);
    // (Whole request bodies are too long for a failure message: what each holds is said instead.)
    const holds = (json: string) => ({
      turn2: json.includes('ok2-0.'),
      turn3First: json.includes('ok3-0.'),
      cutShort: json.includes("%s.' 3-1"),
    });
    const expected = { turn2: agent !== 'acp:gemini', turn3First: keeps, cutShort: false };
    expect(turn4.map(holds)).toEqual(turn4.map(() => expected));
    await stop(b);
  }, 600_000);
});
