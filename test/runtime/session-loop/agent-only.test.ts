import { describe, expect, it } from 'vitest';
import {
  onlyAgentAlive,
  type AttemptProcess,
  type SpawnedAgent,
} from '../../../src/runtime/session-loop/pause-processes.ts';

/**
 * The rule a completed end's snapshot reuse rests on (pause-processes.ts): which live processes of
 * an attempt are the agent's own. The process lists are the shapes /proc shows for pi (a real bwrap
 * run: bwrap, the helper as init, its bridge server and a relay, pi), with tools added.
 */

const p = (pid: number, ppid: number, helper = false, startTime = '100'): AttemptProcess => ({
  pid,
  ppid,
  startTime,
  helper,
});

const bwrap: SpawnedAgent = { pid: 10, startTime: '100', sandbox: 'bwrap' };
/** bwrap (10, child of the worker 1) → init (11, helper) → bridge server (12, helper) → relay (14); pi (13). */
const sandboxed = [p(10, 1), p(11, 10, true), p(12, 11, true), p(13, 11), p(14, 12, true)];

describe('onlyAgentAlive', () => {
  it('bwrap: bwrap, the helper as init, its bridge server and relays, and the agent are the agent’s own', () => {
    expect(onlyAgentAlive(sandboxed, bwrap)).toBe(true);
    // The agent gone already, or no bridge: still only its own.
    expect(
      onlyAgentAlive(
        sandboxed.filter((x) => x.pid !== 13),
        bwrap,
      ),
    ).toBe(true);
    expect(onlyAgentAlive([p(10, 1), p(11, 10, true), p(13, 11)], bwrap)).toBe(true);
  });

  it('bwrap: a tool, what a tool left running (escaped to the init) or a helper a tool ran are not', () => {
    expect(onlyAgentAlive([...sandboxed, p(20, 13)], bwrap)).toBe(false);
    expect(onlyAgentAlive([...sandboxed, p(21, 11)], bwrap)).toBe(false);
    expect(onlyAgentAlive([...sandboxed, p(22, 13, true)], bwrap)).toBe(false);
    // A helper a tool ran that escaped to the init, and what it runs.
    expect(onlyAgentAlive([...sandboxed, p(23, 11, true), p(24, 23)], bwrap)).toBe(false);
    // Two inits, or none.
    expect(onlyAgentAlive([...sandboxed, p(25, 10, true)], bwrap)).toBe(false);
    expect(onlyAgentAlive([p(10, 1), p(13, 10)], bwrap)).toBe(false);
  });

  it('none and landlock: the spawned process alone; anything else with the marker is a tool’s', () => {
    for (const sandbox of ['none', 'landlock'] as const) {
      const agent: SpawnedAgent = { pid: 30, startTime: '100', sandbox };
      expect(onlyAgentAlive([p(30, 1)], agent)).toBe(true);
      expect(onlyAgentAlive([p(30, 1), p(31, 30)], agent)).toBe(false);
      // Escaped: its parent is not the agent any more (reparented to the host's init).
      expect(onlyAgentAlive([p(30, 1), p(32, 1)], agent)).toBe(false);
      // A helper binary run by a tool counts as a tool outside bwrap.
      expect(onlyAgentAlive([p(30, 1), p(33, 30, true)], agent)).toBe(false);
    }
  });

  it('a spawned process not found, or another with its pid (another start time): not known, so no', () => {
    expect(onlyAgentAlive([p(10, 1, false, '999'), ...sandboxed.slice(1)], bwrap)).toBe(false);
    expect(onlyAgentAlive(sandboxed.slice(1), bwrap)).toBe(false);
    expect(onlyAgentAlive(sandboxed, { ...bwrap, startTime: null })).toBe(false);
  });
});
