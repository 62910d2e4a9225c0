import type { SessionContext } from '../../machines/types.ts';
import { scheduleOfPrompt } from './schedules/prompt-id.ts';

/**
 * The prompt of each turn, kept with the transition that started it: the message log holds only
 * what the agent said, and a turn's text leaves the session's context when the next turn starts.
 * `sessiond acp`'s `session/load` replays it. Bounded twice: the history keeps its last 1000
 * transitions (store/scripts.ts), and a prompt longer than TURN_PROMPT_MAX_CHARS is kept cut
 * (`truncated: true`).
 */
export const TURN_PROMPT_MAX_CHARS = 64 * 1024;

export interface TurnPrompt {
  turn: number;
  text: string;
  truncated?: true;
  /** The schedule whose firing enqueued the prompt, and the tick it fired for (schedules/prompt-id.ts). */
  schedule?: { id: string; tick: number };
}

/** Tracks the turns seen by one activation: `next` gives the prompt of a turn that has just started, once. */
export class TurnPrompts {
  /** The highest turn whose prompt is recorded (or was, by an earlier activation). */
  #recorded: number;

  constructor(restoredTurnIndex: number) {
    this.#recorded = restoredTurnIndex;
  }

  next(event: string, context: SessionContext): TurnPrompt | null {
    const turn = context.turn;
    // A restore starts from the restored turn (the constructor's: recorded by an earlier activation); a turn started
    // in the restore's own step (the restored one ended, the next came from the mailbox) is a new turn like any other.
    if (turn === null || turn.index <= this.#recorded) return null;
    this.#recorded = turn.index;
    const schedule = scheduleOfPrompt(turn.promptId);
    return {
      turn: turn.index,
      ...(turn.text.length > TURN_PROMPT_MAX_CHARS
        ? { text: turn.text.slice(0, TURN_PROMPT_MAX_CHARS), truncated: true as const }
        : { text: turn.text }),
      ...(schedule === null ? {} : { schedule }),
    };
  }
}

/** The prompts found in a session's transition history, by turn. */
export function turnPromptsOf(history: readonly unknown[]): Map<number, string> {
  const out = new Map<number, string>();
  for (const entry of history) {
    const prompt = (entry as { prompt?: unknown } | null)?.prompt as Partial<TurnPrompt> | undefined;
    if (prompt !== undefined && typeof prompt.turn === 'number' && typeof prompt.text === 'string')
      out.set(prompt.turn, prompt.text);
  }
  return out;
}
