import { describe, expect, it } from 'vitest';
import type { SessionContext } from '../../machines/types.ts';
import { TURN_PROMPT_MAX_CHARS, TurnPrompts, turnPromptsOf } from '../../src/runtime/turn-prompts.ts';

const at = (turnIndex: number, text = `prompt ${turnIndex}`) =>
  ({ turnIndex, turn: turnIndex === 0 ? null : { index: turnIndex, text } }) as unknown as SessionContext;

describe('turn prompts in the transition history', () => {
  it('the transition that starts a turn carries its prompt, once; later transitions of the turn do not', () => {
    const prompts = new TurnPrompts(0);
    expect(prompts.next('xstate.init', at(0))).toBeNull();
    expect(prompts.next('session.prompt', at(1))).toEqual({ turn: 1, text: 'prompt 1' });
    expect(prompts.next('attempt.ended', at(1))).toBeNull();
    expect(prompts.next('session.prompt', at(2))).toEqual({ turn: 2, text: 'prompt 2' });
  });

  it('after a restore the turn an earlier activation recorded is not recorded again', () => {
    const prompts = new TurnPrompts(3);
    expect(prompts.next('session.restored', at(3))).toBeNull();
    expect(prompts.next('xstate.after', at(3))).toBeNull();
    expect(prompts.next('session.prompt', at(4))).toEqual({ turn: 4, text: 'prompt 4' });
  });

  it("a turn a restore's own step starts (the restored turn ended, the next came from the mailbox) is recorded", () => {
    const prompts = new TurnPrompts(3);
    expect(prompts.next('session.restored', at(3))).toBeNull();
    expect(prompts.next('session.restored', at(4))).toEqual({ turn: 4, text: 'prompt 4' });
  });

  it('a prompt above the cap is kept cut and says so; the history gives each turn its prompt', () => {
    const long = 'x'.repeat(TURN_PROMPT_MAX_CHARS + 10);
    const cut = new TurnPrompts(0).next('session.prompt', at(1, long));
    expect(cut).toEqual({ turn: 1, text: long.slice(0, TURN_PROMPT_MAX_CHARS), truncated: true });
    const history = [
      { to: 'idle' },
      { to: 'running', prompt: { turn: 1, text: 'a' } },
      { to: 'completed' },
      null,
      { to: 'running', prompt: { turn: 2, text: 'b' } },
    ];
    expect([...turnPromptsOf(history)]).toEqual([
      [1, 'a'],
      [2, 'b'],
    ]);
  });
});
