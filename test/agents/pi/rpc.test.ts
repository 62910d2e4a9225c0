import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PiMapper } from '../../../src/agents/pi/mapper.ts';
import { PiRpcTurn, type RpcStep } from '../../../src/agents/pi/rpc.ts';
import type { CliMessage } from '../../../src/protocol/index.ts';
import { failure, terminalOf } from '../contract.ts';
import {
  assistantText,
  CLEAN_EXIT,
  expectedAssistantText,
  mapLines,
  PI_FIXTURES,
  readTranscript,
  recordedExit,
  transcriptNames,
} from './transcripts.ts';

/**
 * pi in `--mode rpc` (recorded by test/support/record-pi-rpc-transcripts.ts): the same events as json
 * mode, plus the answers to sessiond's commands. The generic checks of mapper.test.ts run on these
 * recordings too (every `rpc-*` transcript is in transcriptNames()); here, what differs.
 */
const RPC = transcriptNames().filter((name) => name.startsWith('rpc-'));

function stateAnswer(name: string): { sessionId: string } {
  const line = readTranscript(name).find((l) => l.includes('"id":"sessiond-state"'))!;
  return (JSON.parse(line) as { data: { sessionId: string } }).data;
}

/** Replays a recording through the provider's turn logic: what it would write, report and when it settles. */
function replay(name: string, steers: readonly string[] = []): { steps: RpcStep[]; settledAt: number; lines: number } {
  const lines = readTranscript(name);
  const mapper = new PiMapper();
  const turn = new PiRpcTurn();
  turn.start('(recorded)');
  steers.forEach((text, i) => turn.steer({ promptId: `p${i + 1}`, text }));
  const steps: RpcStep[] = [];
  let settledAt = -1;
  lines.forEach((line, i) => {
    mapper.push(line);
    const step = turn.observe(line, mapper.agentEnded);
    steps.push(step);
    if (step.settled && settledAt < 0) settledAt = i;
  });
  return { steps, settledAt, lines: lines.length };
}

const ASSISTANT_END = JSON.stringify({
  type: 'message_end',
  message: { role: 'assistant', content: [{ type: 'text', text: 'ok' }], stopReason: 'toolUse' },
});

function recordedSteers(name: string): string[] {
  const meta = JSON.parse(readFileSync(join(PI_FIXTURES, `${name}.meta.json`), 'utf8')) as {
    steers: { text: string }[];
  };
  return meta.steers.map((s) => s.text);
}

describe('pi rpc-mode recordings through the mapper', () => {
  it('are present', () => {
    expect(RPC.length).toBeGreaterThanOrEqual(10);
  });

  it.each(RPC)('%s: pi exited 0 once sessiond closed its stdin after the turn', (name) => {
    expect(recordedExit(name)).toEqual(CLEAN_EXIT);
  });

  it("a new session is session.started with the id from get_state's answer (rpc mode prints no header line)", () => {
    const messages = mapLines(readTranscript('rpc-text'));
    expect(readTranscript('rpc-text').some((l) => l.startsWith('{"type":"session"'))).toBe(false);
    expect(messages[0]).toEqual({ type: 'session.started', content: { sessionId: stateAnswer('rpc-text').sessionId } });
    expect(messages.filter((m) => m.type === 'session.started')).toHaveLength(1);
    expect(assistantText(messages)).toBe('Hello from the fake LLM.');
    expect(terminalOf(messages)).toMatchObject({ type: 'terminal.completed', content: { stopReason: 'stop' } });
  });

  it('the resumed session keeps its id and is session.resumed', () => {
    const first = stateAnswer('rpc-session-first').sessionId;
    const lines = readTranscript('rpc-session-resume');
    expect(stateAnswer('rpc-session-resume').sessionId).toBe(first);
    expect(mapLines(lines, CLEAN_EXIT, { resumeSessionId: first })[0]).toEqual({
      type: 'session.resumed',
      content: { sessionId: first },
    });
  });

  it.each([
    ['rpc-http500', 'server_error'],
    ['rpc-midclose', 'network'],
    ['rpc-auto-retry-fail', 'server_error'],
  ] as const)('%s: pi exits 0, and the failed model call is still terminal.failed (%s)', (name, category) => {
    const content = failure(mapLines(readTranscript(name), recordedExit(name)));
    expect(content.category).toBe(category);
    expect(content.agentError).toBeTruthy();
  });

  it('a mid-stream close keeps the streamed partial text, as in json mode', () => {
    const lines = readTranscript('rpc-midclose');
    expect(assistantText(mapLines(lines))).toBe(expectedAssistantText(lines));
    expect(expectedAssistantText(lines)).toBe('Partial answer');
  });

  it('the same answer maps to the same messages in both modes (session id aside)', () => {
    const strip = (messages: CliMessage[]) => messages.filter((m) => !m.type.startsWith('session.'));
    for (const name of ['text', 'tool', 'two-tools', 'text-tool-text', 'thinking']) {
      const json = strip(mapLines(readTranscript(name)));
      const rpc = strip(mapLines(readTranscript(`rpc-${name}`)));
      expect(JSON.stringify(rpc.map((m) => m.type))).toBe(JSON.stringify(json.map((m) => m.type)));
      expect(assistantText(rpc)).toBe(assistantText(json));
    }
  });

  it('a prompt pi refuses ends the attempt as a failure naming its reason', () => {
    const lines = [
      JSON.stringify({ id: 'sessiond-state', type: 'response', command: 'get_state', success: true, data: {} }),
      JSON.stringify({
        id: 'sessiond-prompt',
        type: 'response',
        command: 'prompt',
        success: false,
        error: 'No API key found for fake',
      }),
    ];
    const content = failure(mapLines(lines));
    expect(content.text).toContain('pi refused the prompt: No API key found for fake');
    expect(content.agentError).toBe('No API key found for fake');
  });
});

describe('the turn logic on the recordings (what the provider writes and when it closes stdin)', () => {
  it.each(RPC)(
    '%s: settles exactly once, at the answer to its last get_state, and the recording ends soon after',
    (name) => {
      const { steps, settledAt, lines } = replay(name, recordedSteers(name));
      expect(settledAt).toBeGreaterThan(0);
      expect(readTranscript(name)[settledAt]).toMatch(/"id":"sessiond-settle-\d+"/);
      expect(steps.slice(settledAt + 1).every((s) => s.write.length === 0 && s.delivered.length === 0)).toBe(true);
      // After the settle only what pi had already written can follow (a steer's late answer).
      expect(lines - settledAt).toBeLessThanOrEqual(2);
    },
  );

  it("a retry of pi's own does not end the turn: one get_state per agent_end, settled only after the final one", () => {
    const name = 'rpc-auto-retry-fail';
    const { steps, settledAt } = replay(name);
    const lines = readTranscript(name);
    expect(lines.filter((l) => l.startsWith('{"type":"agent_end"'))).toHaveLength(3);
    expect(steps.flatMap((s) => s.write)).toHaveLength(3);
    expect(lines.slice(0, settledAt).some((l) => l.startsWith('{"type":"auto_retry_end"'))).toBe(true);
  });

  it('a steer written during a tool is echoed as a user message after the tool result, and reported once', () => {
    const name = 'rpc-steer-tool';
    const [text] = recordedSteers(name);
    const { steps } = replay(name, [text!]);
    expect(steps.flatMap((s) => s.delivered)).toEqual(['p1']);
    const lines = readTranscript(name);
    const at = steps.findIndex((s) => s.delivered.length > 0);
    expect(lines[at]).toContain('"role":"user"');
    expect(lines[at]).toContain(text);
    expect(lines.slice(0, at).some((l) => l.startsWith('{"type":"tool_execution_end"'))).toBe(true);
    // The model saw it in the same turn's next request.
    const requests = JSON.parse(readFileSync(join(PI_FIXTURES, `${name}.requests.json`), 'utf8')) as {
      messages: { role: string; content: unknown }[];
    }[];
    expect(requests).toHaveLength(2);
    expect(JSON.stringify(requests[1]!.messages.at(-1))).toContain(text);
  });

  it('a steer written after agent_end is taken by pi into its queue but never echoed: not reported', () => {
    const name = 'rpc-steer-after-end';
    const { steps } = replay(name, recordedSteers(name));
    expect(readTranscript(name).some((l) => l.includes('"command":"steer","success":true'))).toBe(true);
    expect(steps.flatMap((s) => s.delivered)).toEqual([]);
  });

  it('the prompt echo is not a delivery, a steer pi refused is never reported, and an expanded /template steer is matched', () => {
    const turn = new PiRpcTurn();
    turn.start('hello');
    const user = (text: string) =>
      JSON.stringify({ type: 'message_end', message: { role: 'user', content: [{ type: 'text', text }] } });
    turn.observe(ASSISTANT_END, false);
    turn.steer({ promptId: 'a', text: 'hello' });
    turn.steer({ promptId: 'b', text: 'refused' });
    turn.steer({ promptId: 'd', text: 'plain' });
    turn.steer({ promptId: 'c', text: '/review' });
    expect(turn.observe(user('hello'), false).delivered).toEqual([]);
    turn.observe(JSON.stringify({ id: 'sessiond-steer-2', type: 'response', command: 'steer', success: false }), false);
    expect(turn.observe(user('hello'), false).delivered).toEqual(['a']);
    expect(turn.observe(user('refused'), false).delivered).toEqual([]);
    expect(turn.observe(user('a user message of some extension'), false).delivered).toEqual([]);
    expect(turn.observe(user('plain'), false).delivered).toEqual(['d']);
    expect(turn.observe(user('Review the diff (expanded template)'), false).delivered).toEqual(['c']);
  });

  it('a refused prompt settles the turn at once; after the settle no steer is written', () => {
    const turn = new PiRpcTurn();
    turn.start('hello');
    const step = turn.observe(
      JSON.stringify({ id: 'sessiond-prompt', type: 'response', command: 'prompt', success: false, error: 'x' }),
      false,
    );
    expect(step.settled).toBe(true);
    expect(turn.steer({ promptId: 'late', text: 'too late' })).toEqual([]);
  });

  it("a steer before pi's first assistant message ended is held, then written with that line (its session file exists then)", () => {
    const turn = new PiRpcTurn();
    turn.start('hello');
    expect(turn.steer({ promptId: 'early', text: 'early steer' })).toEqual([]);
    const step = turn.observe(ASSISTANT_END, false);
    expect(step.write).toHaveLength(1);
    expect(JSON.parse(step.write[0]!)).toEqual({ id: 'sessiond-steer-1', type: 'steer', message: 'early steer' });
    expect(turn.steer({ promptId: 'next', text: 'next steer' })).toHaveLength(1);
  });
});
