import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { deploymentPolicy } from '../../../src/runtime/deployment-policy.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import type { StoredMessage } from '../../../src/runtime/store/session-store.ts';
import {
  agentRecords,
  assistantText,
  expectWholeLog,
  turnEnded,
  until,
  useRuntimeSuite,
  type Harness,
} from '../../support/runtime.ts';

/**
 * whenBusy "steer" on ACP agents (issue 29) through the durable runtime, with the fake ACP agent: an agent that
 * advertises the steering extension at initialize (`_meta.steering.supported`, as claude-agent-acp does) gets the
 * running turn's steers through `_session/steering` (`via: "native"`), held while a tool call is open; the same agent
 * without it gets the fallback (`via: "restart"`). The decision is the agent's answer, not its definition: both are
 * `acp:<name>` agents, the same program. The tool waits for a gate file the test creates: no timing.
 */

const FAKE = fileURLToPath(new URL('../../fixtures/acp/fake-acp-agent.mjs', import.meta.url));
const steeringState = mkdtempSync(join(tmpdir(), 'sessiond-acp-steer-'));
const plainState = mkdtempSync(join(tmpdir(), 'sessiond-acp-plain-'));
const OPERATOR = {
  'acp:steering': {
    command: process.execPath,
    args: [FAKE],
    env: { FAKE_ACP_STATE_DIR: steeringState, FAKE_ACP_STEERING: '1' },
  },
  'acp:plain': { command: process.execPath, args: [FAKE], env: { FAKE_ACP_STATE_DIR: plainState } },
};
const policy = deploymentPolicy({ workspace: tmpdir(), agents: OPERATOR });

let h: Harness;
let runtime: Runtime;
useRuntimeSuite('acp-steer', {}, async (s) => {
  h = s.h;
  runtime = new Runtime({ connect: h.connect, prefix: h.prefix, policy });
  await h.startWorker({ agentOptions: OPERATOR, policy });
});
afterAll(async () => {
  await runtime?.close();
  for (const dir of [steeringState, plainState]) rmSync(dir, { recursive: true, force: true });
});

let gates = 0;
const newGate = (): string => `gate-${++gates}`;
const steered = (log: StoredMessage[]) => log.filter((m) => m.type === 'prompt.steered');
/** The steers the fake agent got through `_session/steering`: `[text, "tool running" | "idle"]`. */
const received = (state: string): string[][] =>
  existsSync(join(state, 'steers'))
    ? readFileSync(join(state, 'steers'), 'utf8')
        .trim()
        .split('\n')
        .map((line) => line.split('\t'))
    : [];

async function toolRunning(sessionId: string): Promise<void> {
  await until(
    async () => (await runtime.readMessages(sessionId)).some((m) => m.type === 'tool.call'),
    30_000,
    'the tool call',
  );
}

describe('whenBusy steer on ACP agents: native when the agent advertises the extension, else the fallback', () => {
  it('advertised: the steer goes in through _session/steering once the tool is done, prompt.steered via native, same attempt', async () => {
    const gate = newGate();
    const { sessionId } = await runtime.enqueue({ prompt: `steerable ${gate}`, options: { agent: 'acp:steering' } });
    await toolRunning(sessionId);
    const text = `STEER-${gate}: use the blue one`;
    const steer = await runtime.enqueue({ sessionId, prompt: text, whenBusy: 'steer' }, { mustExist: true });
    expect(steer).toMatchObject({ sessionId, turn: 1, created: false, steered: true });
    // Held while the tool call is open: the agent would move a running tool to the background to take it.
    const pending = await runtime.getSession(sessionId);
    expect(pending?.steers.map((s) => s.id)).toEqual([steer.promptId]);
    writeFileSync(join(steeringState, gate), '');

    const session = await turnEnded(runtime, sessionId, 1);
    expect(session.state).toBe('completed');
    expect(session.context?.turnIndex).toBe(1);
    expect(session.steers).toEqual([]);
    expect(session.context?.turn?.attempts.map((a) => a.outcome)).toEqual(['completed']);
    const log = await runtime.readMessages(sessionId);
    expectWholeLog(log);
    expect(log.every((m) => m.turn === 1 && m.attempt === 1)).toBe(true);
    expect(steered(log).map((m) => m.content)).toEqual([
      { promptId: steer.promptId, via: 'native', at: expect.any(Number) },
    ]);
    const types = log.map((m) => m.type);
    // After the tool's result (its answer to the agent and the agent's reply race: no order between them); the agent
    // ran once (no restart, no resume).
    expect(types.indexOf('prompt.steered')).toBeGreaterThan(types.indexOf('tool.completed'));
    expect(types.filter((t) => t.startsWith('session.'))).toEqual(['session.started']);
    expect(types.filter((t) => t.startsWith('terminal.'))).toEqual(['terminal.completed']);
    expect(assistantText(log)).toBe(`Steered: ${text}`);
    // The agent got it once, through the extension, and not while its tool ran.
    expect(received(steeringState).filter(([t]) => t === text)).toEqual([[text, 'idle']]);
    expect(await agentRecords(sessionId)).toEqual([]);
  });

  it('three concurrent steers during the tool: each delivered once through the extension, in the order accepted', async () => {
    const gate = newGate();
    const { sessionId } = await runtime.enqueue({
      prompt: `steerable ${gate} 3`,
      options: { agent: 'acp:steering' },
    });
    await toolRunning(sessionId);
    const texts = [1, 2, 3].map((i) => `STEER-${gate}-${i}`);
    await Promise.all(
      texts.map((prompt) => runtime.enqueue({ sessionId, prompt, whenBusy: 'steer' }, { mustExist: true })),
    );
    // The order they were accepted in: the session's pending steers, oldest first.
    const pending = (await runtime.getSession(sessionId))?.steers ?? [];
    expect(pending.map((p) => p.text).sort()).toEqual([...texts].sort());
    writeFileSync(join(steeringState, gate), '');

    const session = await turnEnded(runtime, sessionId, 1);
    expect(session.state).toBe('completed');
    expect(session.context?.turnIndex).toBe(1);
    expect(session.steers).toEqual([]);
    const log = await runtime.readMessages(sessionId);
    expectWholeLog(log);
    expect(steered(log).map((m) => [m.turn, m.attempt, m.content])).toEqual(
      pending.map((p) => [1, 1, { promptId: p.id, via: 'native', at: expect.any(Number) }]),
    );
    expect(assistantText(log)).toBe(`Steered: ${pending.map((p) => p.text).join(' | ')}`);
    const got = received(steeringState).filter(([t]) => texts.includes(t ?? ''));
    expect(got).toEqual(pending.map((p) => [p.text, 'idle']));
  });

  it('not advertised: the same program gets the fallback (stopped at the tool boundary, resumed with the text), via restart', async () => {
    const gate = newGate();
    const { sessionId } = await runtime.enqueue({ prompt: `steerable ${gate}`, options: { agent: 'acp:plain' } });
    await toolRunning(sessionId);
    const text = `STEER-${gate}: use the red one`;
    const steer = await runtime.enqueue({ sessionId, prompt: text, whenBusy: 'steer' }, { mustExist: true });
    writeFileSync(join(plainState, gate), '');

    const session = await turnEnded(runtime, sessionId, 1);
    expect(session.state).toBe('completed');
    expect(session.context?.turnIndex).toBe(1);
    expect(session.context?.turn?.attempts.map((a) => a.outcome)).toEqual(['completed']);
    const log = await runtime.readMessages(sessionId);
    expectWholeLog(log);
    expect(steered(log).map((m) => m.content)).toEqual([
      { promptId: steer.promptId, via: 'restart', at: expect.any(Number) },
    ]);
    const types = log.map((m) => m.type);
    expect(types.filter((t) => t.startsWith('session.'))).toEqual(['session.started', 'session.resumed']);
    expect(assistantText(log)).toBe(`Steered: ${text}`);
    // Nothing went through the extension: the agent did not advertise it.
    expect(received(plainState)).toEqual([]);
  });

  it('the prompt ended before the steer went in (promptRequired): not delivered there, it becomes the next turn, once', async () => {
    const gate = newGate();
    const { sessionId } = await runtime.enqueue({ prompt: `steerable ${gate}`, options: { agent: 'acp:steering' } });
    await toolRunning(sessionId);
    // As when the agent's prompt ends first: it answers promptRequired and keeps nothing.
    writeFileSync(join(steeringState, 'steer-ended'), '');
    const text = `STEER-${gate}: too late`;
    try {
      const steer = await runtime.enqueue({ sessionId, prompt: text, whenBusy: 'steer' }, { mustExist: true });
      writeFileSync(join(steeringState, gate), '');
      await until(async () => received(steeringState).some(([t]) => t === text), 30_000, 'the steer sent');
      writeFileSync(join(steeringState, `${gate}.finish`), '');

      const session = await turnEnded(runtime, sessionId, 2);
      expect(session.state).toBe('completed');
      expect(session.steers).toEqual([]);
      const log = await runtime.readMessages(sessionId);
      expectWholeLog(log);
      expect(steered(log).map((m) => [m.turn, m.attempt, m.content])).toEqual([
        [2, 0, { promptId: steer.promptId, via: 'turn', turn: 2, at: expect.any(Number) }],
      ]);
      expect(assistantText(log.filter((m) => m.turn === 1))).toBe('finished');
      expect(assistantText(log.filter((m) => m.turn === 2))).toBe(`Steered: ${text}`);
      // Offered once through the extension (refused), then its own turn's prompt: never taken twice.
      expect(received(steeringState).filter(([t]) => t === text)).toHaveLength(1);
    } finally {
      rmSync(join(steeringState, 'steer-ended'), { force: true });
    }
  });
});
