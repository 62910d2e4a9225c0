import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { codex } from '../../../src/agents/codex/definition.ts';
import { codexStateAfterTool, type CodexRolloutState } from '../../../src/agents/codex/session-file.ts';
import { CodexMapper } from '../../../src/agents/codex/mapper.ts';
import { CODEX_FIXTURES } from './transcripts.ts';

/**
 * The cut of Codex's rollout after a turn's completed tool calls, on rollouts the real `codex` (0.171) wrote
 * (test/agents/record-session-cuts.ts): `cancel-second-tool` (a command completed, a second one was interrupted
 * by SIGINT), `two-tools` (two calls in one response).
 */

const DIR = join(CODEX_FIXTURES, 'session-cuts');
const read = (name: string, kind: 'stdout' | 'session'): string =>
  readFileSync(join(DIR, `${name}.${kind}.jsonl`), 'utf8');
const rollout = (content: string): CodexRolloutState => ({
  version: 1,
  path: '2026/12/03/rollout-2026-12-03T19-22-34-01a23d5b-b6dc-7181-990b-06e000d209ca.jsonl',
  content,
});

/** The rollout's lines (each with its newline). */
const linesOf = (content: string): string[] => content.split(/(?<=\n)/);
/** The first `n` lines of a rollout: the file as it stood when Codex had written them. */
const prefix = (content: string, n: number): string => linesOf(content).slice(0, n).join('');
/** The index of the first line holding all of `parts`. */
const lineWith = (content: string, ...parts: string[]): number =>
  linesOf(content).findIndex((line) => parts.every((part) => line.includes(part)));

/** How many tool calls the recorded run reported ended while it ran, as sessiond's mapper reads its stdout. */
function toolCallsEnded(name: string): number {
  const mapper = new CodexMapper();
  const lines = read(name, 'stdout').split('\n').filter(Boolean);
  return lines
    .flatMap((line) => mapper.push(line))
    .filter((m) => m.type === 'tool.completed' || m.type === 'tool.failed').length;
}

describe("Codex rollout cut after a turn's completed tool calls", () => {
  it("a cancel during the second call: cut just after the first call's output, nothing of the second", () => {
    const content = read('cancel-second-tool', 'session');
    // The run reported one call ended (the second one was interrupted: no item.completed).
    expect(toolCallsEnded('cancel-second-tool')).toBe(1);
    const output = lineWith(content, '"function_call_output"', 'call_fake_1_0');
    expect(output).toBeGreaterThan(0);
    const cut = codexStateAfterTool(rollout(content), 1);
    expect(cut?.state.content).toBe(prefix(content, output + 1));
    expect(cut?.state.content).toContain('ok0');
    for (const gone of ['call_fake_2_0', 'echo half', 'turn_aborted', 'aborted by user'])
      expect(cut?.state.content).not.toContain(gone);
    // The whole file holds the second call after it: the model asked for more, which may be running.
    expect(cut?.later).toBe(true);
    // Read as the file stood just after that output: the same cut, nothing later.
    expect(codexStateAfterTool(rollout(prefix(content, output + 1)), 1)).toEqual({ state: cut?.state, later: false });
    // Before the output was written (the item's end is recorded first), or with the output line torn: no cut yet.
    expect(codexStateAfterTool(rollout(prefix(content, output)), 1)).toBeNull();
    expect(codexStateAfterTool(rollout(prefix(content, output + 1).slice(0, -1)), 1)).toBeNull();
    // The interrupted call's end, recorded after the turn was aborted, is no completed call.
    expect(codexStateAfterTool(rollout(content), 2)).toBeNull();
  });

  it('two calls in one response: the first alone is later (the second call is in the cut without its output)', () => {
    const content = read('two-tools', 'session');
    expect(toolCallsEnded('two-tools')).toBe(2);
    const first = codexStateAfterTool(rollout(content), 1);
    expect(first?.state.content).toBe(
      prefix(content, lineWith(content, '"function_call_output"', 'call_fake_1_0') + 1),
    );
    expect(first?.state.content).toContain('"call_id":"call_fake_1_1"');
    expect(first?.later).toBe(true);
    const both = codexStateAfterTool(rollout(content), 2);
    expect(both?.state.content).toBe(prefix(content, lineWith(content, '"function_call_output"', 'call_fake_1_1') + 1));
    expect(both?.state.content).not.toContain('Done.');
    expect(both?.later).toBe(false);
    expect(codexStateAfterTool(rollout(content), 3)).toBeNull();
    expect(codexStateAfterTool(rollout(content), 0)).toBeNull();
  });

  it("counts the calls of the rollout's last turn only (a resumed thread: a run is one turn)", () => {
    const earlier = read('cancel-second-tool', 'session');
    const turn = read('two-tools', 'session');
    // The two-tools turn (from its task_started) after the earlier rollout, as a resumed run appends it.
    const appended = linesOf(turn).slice(lineWith(turn, '"task_started"')).join('');
    const content = earlier + appended;
    // Both recordings call their first call call_fake_1_0: the cut is after the later turn's output.
    const output = linesOf(earlier).length + lineWith(appended, '"function_call_output"', 'call_fake_1_0');
    const cut = codexStateAfterTool(rollout(content), 1);
    expect(cut?.state.content).toBe(prefix(content, output + 1));
    expect(cut?.state.content.startsWith(earlier)).toBe(true);
    expect(codexStateAfterTool(rollout(content), 2)?.later).toBe(false);
  });

  it("the definition's stateAfterTool cuts its exported state by the run's count of ended calls, not the item id", () => {
    const content = read('cancel-second-tool', 'session');
    const cut = codex.stateAfterTool?.(JSON.stringify(rollout(content)), 'item_0', { toolCallsEnded: 1 });
    expect(cut?.later).toBe(true);
    expect(JSON.parse(cut?.state ?? 'null')).toEqual(codexStateAfterTool(rollout(content), 1)?.state);
    expect(codex.stateAfterTool?.(JSON.stringify(rollout(content)), 'item_0', { toolCallsEnded: 2 })).toBeNull();
  });
});
