import { describe, expect, it } from 'vitest';
import { takeBackTo, type TurnPoint } from '../../src/runtime/workspace-turns.ts';

/** Going back to a recorded point (workspace-turns.ts `takeBackTo`), as undo and a whenBusy "rollback" share it. */

const point = (turn: number, mark: number | null, agentSessionId: string | null = 'conv-1'): TurnPoint => ({
  turn,
  snapshot: `snap-${turn}`,
  at: 1000 + turn,
  agentSessionId,
  mark,
});
const points = [point(0, null, null), point(1, 3), point(2, 7), point(3, 12)];
const how = { agent: 'pi', label: 'undo of turn 3', now: 5000 };

describe('takeBackTo', () => {
  it('back to a completed turn: the points up to it, a pointer to its snapshot and conversation, its state cut at its mark', () => {
    expect(takeBackTo(points, 2, how)).toEqual({
      to: points[2],
      turns: points.slice(0, 3),
      pointer: {
        version: 1,
        snapshot: 'snap-2',
        label: 'undo of turn 3',
        at: 5000,
        turn: 2,
        attempt: 0,
        agentSessionId: 'conv-1',
        promptRecorded: true,
      },
      state: { field: 'pi:conv-1', mark: 7 },
    });
  });

  it("back to the session's start: its files and a new conversation, no state to cut", () => {
    const back = takeBackTo(points, 0, { ...how, label: 'rollback of turn 1' });
    expect(back).toMatchObject({
      turns: [points[0]],
      pointer: { snapshot: 'snap-0', turn: 0, agentSessionId: null, fresh: true, label: 'rollback of turn 1' },
      state: null,
    });
  });

  it("refuses a turn recorded without the agent's state mark, or without its conversation", () => {
    expect(takeBackTo([point(0, null, null), point(1, null)], 1, how)).toEqual({
      refused: "turn 1 was recorded without the agent's state mark",
    });
    expect(takeBackTo([point(0, null, null), point(1, 4, null)], 1, how)).toEqual({
      refused: "turn 1 was recorded without the agent's state mark",
    });
  });

  it('refuses a point that is not recorded', () => {
    expect(takeBackTo(points, -1, how)).toEqual({ refused: 'no earlier point is recorded' });
    expect(takeBackTo([], 0, how)).toEqual({ refused: 'no earlier point is recorded' });
  });

  it('leaves the points it was given as they were', () => {
    const copy = structuredClone(points);
    takeBackTo(points, 1, how);
    expect(points).toEqual(copy);
  });
});
