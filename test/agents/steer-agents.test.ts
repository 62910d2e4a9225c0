import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { findProcessesByMarker } from '../../src/process/index.ts';
import { deploymentPolicy } from '../../src/runtime/deployment-policy.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import type { StoredMessage } from '../../src/runtime/store/session-store.ts';
import { claudeBin, createClaudeEnv, type ClaudeEnv } from '../support/claude-code-env.ts';
import { hasToolResult, startFakeAnthropicServer, type FakeAnthropicServer } from '../support/fake-anthropic-server.ts';
import { hasFunctionResponse, startFakeGeminiServer, type FakeGeminiServer } from '../support/fake-gemini-server.ts';
import {
  hasFunctionCallOutput,
  startFakeResponsesServer,
  type FakeResponsesServer,
} from '../support/fake-responses-server.ts';
import { agentRecords, expectWholeLog, turnEnded, until, useRuntimeSuite } from '../support/runtime.ts';
import type { FakeModelServer } from '../support/fake-model-server.ts';
import { claudeAcpBin, claudeAcpEnv, geminiAcpEnv, qwenBin, qwenEnv, type AcpCliEnv } from './acp/acp-clis.ts';
import { codexBin, createCodexEnv, FAKE_KEY_ENV, FAKE_MODEL, type CodexEnv } from './codex/codex-env.ts';
import { createGeminiEnv, geminiBin, type GeminiEnv } from './gemini/gemini-env.ts';

/**
 * whenBusy "steer" and "interrupt" (issue 29) with the real Claude Code, Codex and Gemini CLIs and one ACP
 * agent (`acp:qwen`, qwen --acp: it resumes with `session/resume`), each against its fake model API on 127.0.0.1, through the durable
 * runtime. None of them has a native channel sessiond uses: a steer takes the fallback (the attempt's agent
 * stopped at the tool boundary, then resumed in the same attempt with the steer's text). The Claude Code ACP
 * adapter (`acp:claude`) advertises the steering extension: a steer goes in natively. The tool waits for a
 * gate file the test creates: no timing.
 *
 * The fake model of each agent decides from what it is sent: a request carrying a steer (`STEER-<n>`) is
 * answered with the steers it saw; one carrying the interrupting prompt (`NEXT-TURN`) with a text; one naming no
 * gate (`gate-<n>`) or with the tool's result with a text; any other with the tool call that waits for the gate.
 */

const gates = mkdtempSync(join(tmpdir(), 'sessiond-steer-agents-gates-'));
let gateCount = 0;
const newGate = (): string => `gate-${++gateCount}-${process.pid}`;
const openGate = (gate: string): void => writeFileSync(join(gates, gate), '');

/**
 * A shell command that waits for the gate file, then prints GATE-OPENED (split in the command: only its output has
 * it). node, since Claude Code refuses a bare sleep.
 */
const waitFor = (gate: string): string =>
  `node -e "setInterval(() => { if (require('fs').existsSync('${join(gates, gate)}')) { console.log('GATE-' + 'OPENED'); process.exit(0); } }, 100)"`;

type Step = { text: string } | { command: string };
/** What the fake model answers a request whose body (as JSON) is `body`; `toolDone`: it carries a tool's result. */
function decide(body: string, toolDone: boolean): Step {
  const steers = body.match(/STEER-\d+/g);
  if (steers !== null) return { text: `Steered: ${[...new Set(steers)].join(' ')}.` };
  if (body.includes('NEXT-TURN')) return { text: 'The next turn ran.' };
  const gate = /gate-\d+-\d+/.exec(body)?.[0];
  if (gate === undefined) return { text: 'Remembered.' };
  if (toolDone) return { text: 'The wait is over.' };
  return { command: waitFor(gate) };
}

interface AgentCase {
  agent: string;
  /** A session's options for this agent. */
  options: () => Record<string, unknown>;
  /** The bodies of the requests this agent's fake API got for the steer test's model, as JSON, in order. */
  requests: () => string[];
}

let runtime: Runtime;
let anthropic: FakeAnthropicServer;
let responses: FakeResponsesServer;
let google: FakeGeminiServer;
let openai: FakeModelServer;
let claude: ClaudeEnv;
let codex: CodexEnv;
let gemini: GeminiEnv;
let acp: AcpCliEnv;
let acpGemini: AcpCliEnv;
let acpClaude: AcpCliEnv;
/** claude-agent-acp 0.101: it advertises `_session/steering` at initialize (`_meta.steering.supported`). */
const ACP_CLAUDE = 'acp:claude';
const ACP_CLAUDE_MODEL = 'steer-agents-acp-claude';
/** gemini --acp: it offers session/load, which 0.61 breaks within the minute a session's chat file was created. */
const ACP_GEMINI = 'acp:gemini';
const ACP_GEMINI_MODEL = 'steer-agents-acp';
const MODEL = 'steer-agents';
const ACP_AGENT = 'acp:qwen';

const CASES: AgentCase[] = [
  {
    agent: 'claude-code',
    options: () => ({ agent: 'claude-code', model: MODEL, cwd: claude.cwd }),
    requests: () => anthropic.requestsFor(MODEL).map((r) => JSON.stringify(r.body.messages)),
  },
  {
    agent: 'codex',
    options: () => ({ agent: 'codex', model: FAKE_MODEL, cwd: codex.cwd }),
    requests: () => responses.requestsFor(MODEL).map((r) => JSON.stringify(r.body.input)),
  },
  {
    agent: 'gemini',
    options: () => ({ agent: 'gemini', model: MODEL, cwd: gemini.cwd }),
    requests: () => google.requestsFor(MODEL).map((r) => JSON.stringify(r.body.contents)),
  },
  {
    agent: ACP_AGENT,
    options: () => ({ agent: ACP_AGENT, permissionMode: 'allow', cwd: acp.cwd }),
    requests: () => openai.requestsFor(MODEL).map((r) => JSON.stringify(r.body.messages)),
  },
];

useRuntimeSuite(
  'steer-agents',
  {
    cleanup: () => {
      rmSync(gates, { recursive: true, force: true });
    },
  },
  async (s) => {
    openai = s.server;
    for (const bin of [claudeBin, codexBin, geminiBin, qwenBin, claudeAcpBin])
      if (!existsSync(bin)) throw new Error(`${bin} not found: run scripts/install-agent-clis.sh`);
    [anthropic, responses, google] = await Promise.all([
      startFakeAnthropicServer(),
      startFakeResponsesServer(),
      startFakeGeminiServer(),
    ]);
    const anthropicScript = ({ body }: { body: Parameters<typeof hasToolResult>[0] }) => {
      const step = decide(JSON.stringify(body.messages), hasToolResult(body));
      return 'text' in step
        ? { text: step.text }
        : { toolUses: [{ name: 'Bash', input: { command: step.command, description: 'Wait for the gate' } }] };
    };
    anthropic.setScript(MODEL, anthropicScript);
    anthropic.setScript(ACP_CLAUDE_MODEL, (ctx) => {
      const messages = JSON.stringify(ctx.body.messages);
      // A turn's last model request that never ends by itself (the agent's loop sends tools; its title request
      // does not): only a steer, which makes the adapter abort it and ask again, moves the turn on.
      if (messages.includes('SLOW-') && !/STEER-\d+/.test(messages) && (ctx.body.tools?.length ?? 0) > 0)
        return { text: ['Thinking', ' it', ' over'], then: 'hang', afterEvents: 3 };
      return anthropicScript(ctx);
    });
    responses.setScript(MODEL, ({ body }) => {
      const step = decide(JSON.stringify(body.input), hasFunctionCallOutput(body));
      return 'text' in step
        ? { text: step.text }
        : { functionCalls: [{ name: 'exec_command', arguments: { cmd: step.command } }] };
    });
    const geminiScript = ({ body }: { body: Parameters<typeof hasFunctionResponse>[0] }) => {
      const step = decide(JSON.stringify(body.contents), hasFunctionResponse(body));
      return 'text' in step
        ? { text: step.text }
        : {
            functionCalls: [
              { name: 'run_shell_command', args: { command: step.command, description: 'Wait for the gate' } },
            ],
          };
    };
    google.setScript(MODEL, geminiScript);
    google.setScript(ACP_GEMINI_MODEL, geminiScript);
    openai.setScript(MODEL, ({ body }) => {
      const messages = body.messages ?? [];
      const step = decide(
        JSON.stringify(messages),
        messages.some((m) => m.role === 'tool'),
      );
      return 'text' in step
        ? { text: step.text }
        : { toolCalls: [{ name: 'run_shell_command', arguments: { command: step.command } }] };
    });
    claude = createClaudeEnv(anthropic.url);
    codex = createCodexEnv();
    gemini = createGeminiEnv({ serverUrl: google.url });
    acp = qwenEnv(`${openai.url}/v1`);
    acpGemini = geminiAcpEnv(google.url);
    acpClaude = claudeAcpEnv(anthropic.url);
    const operator = {
      'claude-code': { ...claude.options, allowedTools: ['Bash'] },
      codex: {
        baseUrl: responses.urlFor(MODEL),
        envKey: FAKE_KEY_ENV,
        command: codexBin,
        codexHome: codex.userCodexHome,
        env: codex.env,
      },
      gemini: { configDir: gemini.configDir, command: geminiBin, env: gemini.env, approvalMode: 'yolo' },
      [ACP_AGENT]: acp.agent(MODEL),
      [ACP_GEMINI]: acpGemini.agent(ACP_GEMINI_MODEL),
      [ACP_CLAUDE]: acpClaude.agent(ACP_CLAUDE_MODEL),
    };
    const policy = deploymentPolicy({
      workspace: tmpdir(),
      agents: {
        [ACP_AGENT]: operator[ACP_AGENT],
        [ACP_GEMINI]: operator[ACP_GEMINI],
        [ACP_CLAUDE]: operator[ACP_CLAUDE],
      },
      policy: {
        permissions: {
          [ACP_AGENT]: { ceiling: 'allow' },
          [ACP_GEMINI]: { ceiling: 'allow' },
          [ACP_CLAUDE]: { ceiling: 'allow' },
        },
      },
    });
    runtime = new Runtime({ connect: s.h.connect, prefix: s.h.prefix, policy });
    await s.h.startWorker({ agentOptions: operator, policy });
  },
);
afterAll(async () => {
  await runtime?.close();
  await Promise.all([anthropic?.close(), responses?.close(), google?.close()]);
  for (const env of [claude, codex, gemini, acp, acpGemini, acpClaude]) env?.cleanup();
});

/** A process's command line ('' once it is gone). */
function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    // Gone between the listing and the read: not the tool.
    return '';
  }
}

/** A test's bound: qwen takes ~30-60 s for the two turns of the interrupt test on a loaded 2-core host. */
const TIMEOUT = 240_000;

const ofType = (log: StoredMessage[], type: string) => log.filter((m) => m.type === type);

/** Until the running attempt's tool waits at its gate: its tool.call is logged and the tool's process runs. */
async function toolRunning(sessionId: string, gate: string): Promise<string> {
  await until(
    async () => (await runtime.readMessages(sessionId)).some((m) => m.type === 'tool.call'),
    120_000,
    'the tool call',
  );
  const [record] = await until(async () => {
    const records = await agentRecords(sessionId);
    return records[0]?.pid != null ? records : null;
  });
  if (record === undefined) throw new Error('no agent process recorded');
  await until(
    async () => (await findProcessesByMarker(record.marker)).some((p) => cmdline(p.pid).includes(gate)),
    60_000,
    'the tool to run',
  );
  return record.marker;
}

describe.each(CASES)('$agent: whenBusy with the fallback', ({ options, requests }) => {
  it(
    'a steer during a long tool reaches the model in the same turn once the tool is done: one prompt.steered via restart, no new turn',
    async () => {
      const gate = newGate();
      const { sessionId } = await runtime.enqueue({ prompt: `Wait for ${gate}`, options: options() });
      await toolRunning(sessionId, gate);
      const steerText = `STEER-${gateCount}: use the blue one`;
      const steer = await runtime.enqueue({ sessionId, prompt: steerText, whenBusy: 'steer' }, { mustExist: true });
      expect(steer).toMatchObject({ sessionId, turn: 1, created: false, steered: true });
      const before = requests().length;
      openGate(gate);

      const session = await turnEnded(runtime, sessionId, 1, 180_000);
      expect(session.state).toBe('completed');
      expect(session.context?.turnIndex).toBe(1);
      expect(session.steers).toEqual([]);
      expect(session.context?.turn?.attempts.map((a) => a.outcome)).toEqual(['completed']);

      const log = await runtime.readMessages(sessionId);
      expectWholeLog(log);
      expect(log.every((m) => m.turn === 1 && m.attempt === 1)).toBe(true);
      expect(ofType(log, 'prompt.steered').map((m) => m.content)).toEqual([
        { promptId: steer.promptId, via: 'restart', at: expect.any(Number) },
      ]);
      const types = log.map((m) => m.type);
      // The tool ran once: the resumed agent had its result and did not call it again.
      expect(types.filter((t) => t === 'tool.call')).toHaveLength(1);
      expect(types.indexOf('prompt.steered')).toBeGreaterThan(types.indexOf('tool.completed'));
      expect(types.filter((t) => t.startsWith('terminal.'))).toEqual(['terminal.completed']);
      // The resumed agent said so, in its own session. The steer is recorded delivered with the agent's state that
      // holds it (in a caller's cwd: carried out at the resumed run's completed end, just before the attempt's end).
      expect(types.slice(types.indexOf('tool.completed') + 1)).toContain('session.resumed');
      expect(types.slice(-2)).toEqual(['prompt.steered', 'terminal.completed']);
      expect(
        ofType(log, 'assistant')
          .map((m) => (m.content as { text: string }).text)
          .join(''),
      ).toContain(`Steered: STEER-${gateCount}.`);

      // A later request of the turn carries the steer, in the same conversation: the first prompt and the tool's result.
      const steered = requests()
        .slice(before)
        .filter((r) => r.includes(steerText));
      expect(steered.length).toBeGreaterThan(0);
      expect(steered[0]).toContain(`Wait for ${gate}`);
      expect(steered[0]).toContain('GATE-OPENED');
      expect(await agentRecords(sessionId)).toEqual([]);
    },
    TIMEOUT,
  );

  it(
    'interrupt during a long tool: the new prompt runs before the tool would have ended, in the same conversation; no process left',
    async () => {
      // A first turn that completes: the agent's session the interrupting prompt resumes (an interrupted first turn
      // leaves none: the machine resumes an agent's session once a turn of it completed or recorded its prompt).
      const word = `WORD-${++gateCount}`;
      const { sessionId } = await runtime.enqueue({ prompt: `Remember ${word}`, options: options() });
      expect((await turnEnded(runtime, sessionId, 1, 180_000)).state).toBe('completed');
      const gate = newGate();
      await runtime.enqueue({ sessionId, prompt: `Wait for ${gate}` }, { mustExist: true });
      const marker = await toolRunning(sessionId, gate);
      const { turn } = await runtime.enqueue(
        { sessionId, prompt: 'NEXT-TURN: forget it, say something else', whenBusy: 'interrupt' },
        { mustExist: true },
      );
      expect(turn).toBe(3);

      // The gate is never opened: the tool would never end on its own.
      const third = await turnEnded(runtime, sessionId, 3, 180_000);
      expect(third.state).toBe('completed');
      expect(await findProcessesByMarker(marker)).toEqual([]);
      expect(await agentRecords(sessionId)).toEqual([]);

      const log = await runtime.readMessages(sessionId);
      expectWholeLog(log);
      expect(log.filter((m) => m.turn === 2 && m.type.startsWith('terminal.')).map((m) => [m.type, m.content])).toEqual(
        [['terminal.cancelled', { reason: 'interrupted' }]],
      );
      expect(log.filter((m) => m.turn === 2 && m.type === 'tool.failed').map((m) => m.content)).toMatchObject([
        { error: 'the attempt was cancelled' },
      ]);
      expect(log.filter((m) => m.turn === 3).at(-1)?.type).toBe('terminal.completed');
      expect(log.filter((m) => m.turn === 3 && m.type.startsWith('session.')).map((m) => m.type)).toEqual([
        'session.resumed',
      ]);
      expect(ofType(log, 'prompt.steered')).toEqual([]);
      // The same conversation: the interrupting prompt's request carries the first turn's prompt.
      const asked = requests().filter((r) => r.includes('NEXT-TURN'));
      expect(asked.length).toBeGreaterThan(0);
      expect(asked.at(-1)).toContain(`Remember ${word}`);
    },
    TIMEOUT,
  );
});

describe('acp:gemini: the fallback without a resume', () => {
  it(
    'gemini 0.61 cannot load its session yet: the steer goes on in a new session (session.started), its text alone',
    async () => {
      const gate = newGate();
      const { sessionId } = await runtime.enqueue({
        prompt: `Wait for ${gate}`,
        options: { agent: ACP_GEMINI, permissionMode: 'allow', cwd: acpGemini.cwd },
      });
      await toolRunning(sessionId, gate);
      const steerText = `STEER-${gateCount}: use the blue one`;
      const steer = await runtime.enqueue({ sessionId, prompt: steerText, whenBusy: 'steer' }, { mustExist: true });
      openGate(gate);
      const session = await turnEnded(runtime, sessionId, 1, 180_000);
      expect(session.state).toBe('completed');
      expect(session.context?.turnIndex).toBe(1);
      const log = await runtime.readMessages(sessionId);
      expect(ofType(log, 'prompt.steered').map((m) => m.content)).toEqual([
        { promptId: steer.promptId, via: 'restart', at: expect.any(Number) },
      ]);
      const types = log.map((m) => m.type);
      expect(types.filter((t) => t.startsWith('session.'))).toEqual(['session.started', 'session.started']);
      const first = (ofType(log, 'session.started')[0]?.content as { sessionId: string }).sessionId;
      expect((ofType(log, 'session.started')[1]?.content as { sessionId: string }).sessionId).not.toBe(first);
      // The model gets the steer without the conversation before it.
      const steered = google.requestsFor(ACP_GEMINI_MODEL).map((r) => JSON.stringify(r.body.contents));
      const withSteer = steered.filter((r) => r.includes(steerText));
      expect(withSteer.length).toBeGreaterThan(0);
      expect(withSteer[0]).not.toContain(`Wait for ${gate}`);
    },
    TIMEOUT,
  );
});

describe("acp:claude: whenBusy steer through the adapter's steering extension", () => {
  it(
    'a steer during a long tool goes in natively once the tool is done: one prompt.steered via native, the same attempt, the tool not moved to the background',
    async () => {
      const gate = newGate();
      const { sessionId } = await runtime.enqueue({
        prompt: `Wait for ${gate}`,
        options: { agent: ACP_CLAUDE, permissionMode: 'allow', cwd: acpClaude.cwd },
      });
      await toolRunning(sessionId, gate);
      const steerText = `STEER-${gateCount}: use the blue one`;
      const steer = await runtime.enqueue({ sessionId, prompt: steerText, whenBusy: 'steer' }, { mustExist: true });
      expect(steer).toMatchObject({ sessionId, turn: 1, created: false, steered: true });
      const requests = () => anthropic.requestsFor(ACP_CLAUDE_MODEL).map((r) => JSON.stringify(r.body.messages));
      const before = requests().length;
      openGate(gate);

      const session = await turnEnded(runtime, sessionId, 1, 180_000);
      expect(session.state).toBe('completed');
      expect(session.context?.turnIndex).toBe(1);
      expect(session.steers).toEqual([]);
      expect(session.context?.turn?.attempts.map((a) => a.outcome)).toEqual(['completed']);

      const log = await runtime.readMessages(sessionId);
      expectWholeLog(log);
      expect(log.every((m) => m.turn === 1 && m.attempt === 1)).toBe(true);
      expect(ofType(log, 'prompt.steered').map((m) => m.content)).toEqual([
        { promptId: steer.promptId, via: 'native', at: expect.any(Number) },
      ]);
      const types = log.map((m) => m.type);
      // The tool ran once, to its end: held while it ran, the steer did not move it to the background (taken during
      // the tool, the adapter does: its result then comes before the tool's output, and the steer before it here).
      expect(types.filter((t) => t === 'tool.call')).toHaveLength(1);
      expect(types.indexOf('prompt.steered')).toBeGreaterThan(types.indexOf('tool.completed'));
      // No restart: the agent's one session, never resumed.
      expect(types.filter((t) => t.startsWith('session.'))).toEqual(['session.started']);
      expect(types.filter((t) => t.startsWith('terminal.'))).toEqual(['terminal.completed']);
      expect(
        ofType(log, 'assistant')
          .map((m) => (m.content as { text: string }).text)
          .join(''),
      ).toContain(`Steered: STEER-${gateCount}.`);

      // The first request of the turn with the steer has the tool's own result, in the same conversation.
      const steered = requests()
        .slice(before)
        .filter((r) => r.includes(steerText));
      expect(steered.length).toBeGreaterThan(0);
      expect(steered[0]).toContain(`Wait for ${gate}`);
      expect(steered[0]).toContain('GATE-OPENED');
      expect(await agentRecords(sessionId)).toEqual([]);
    },
    TIMEOUT,
  );

  it(
    "a steer during the turn's last model request goes into that turn: the prompt answers only after the steered reply",
    async () => {
      const word = `SLOW-${++gateCount}`;
      const { sessionId } = await runtime.enqueue({
        prompt: `Think about ${word}`,
        options: { agent: ACP_CLAUDE, permissionMode: 'allow', cwd: acpClaude.cwd },
      });
      await until(
        async () => (await runtime.readMessages(sessionId)).some((m) => m.type === 'assistant'),
        120_000,
        'the first text',
      );
      const steerText = `STEER-${gateCount}: and the red one`;
      const steer = await runtime.enqueue({ sessionId, prompt: steerText, whenBusy: 'steer' }, { mustExist: true });
      expect(steer).toMatchObject({ sessionId, turn: 1, steered: true });

      // The model request never ends by itself: the turn ends only if the steer went in (claude-agent-acp#934: a
      // prompt that answered before its injected steer ran would leave the steer to a process sessiond stops).
      const session = await turnEnded(runtime, sessionId, 1, 180_000);
      expect(session.state).toBe('completed');
      expect(session.context?.turnIndex).toBe(1);
      expect(session.steers).toEqual([]);
      expect(session.context?.turn?.attempts.map((a) => a.outcome)).toEqual(['completed']);
      const log = await runtime.readMessages(sessionId);
      expectWholeLog(log);
      expect(log.every((m) => m.turn === 1 && m.attempt === 1)).toBe(true);
      expect(ofType(log, 'prompt.steered').map((m) => m.content)).toEqual([
        { promptId: steer.promptId, via: 'native', at: expect.any(Number) },
      ]);
      const types = log.map((m) => m.type);
      expect(types.filter((t) => t.startsWith('session.'))).toEqual(['session.started']);
      expect(types.at(-1)).toBe('terminal.completed');
      const text = ofType(log, 'assistant')
        .map((m) => (m.content as { text: string }).text)
        .join('');
      expect(text).toContain(`Steered: STEER-${gateCount}.`);
      const asked = anthropic.requestsFor(ACP_CLAUDE_MODEL).map((r) => JSON.stringify(r.body.messages));
      expect(asked.filter((r) => r.includes(steerText) && r.includes(word)).length).toBeGreaterThan(0);
      expect(await agentRecords(sessionId)).toEqual([]);
    },
    TIMEOUT,
  );
});
