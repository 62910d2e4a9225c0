import type { Transition } from '../../../machines/restore.ts';
import type { SessionContext } from '../../../machines/types.ts';
import { AttemptTally } from '../counters.ts';
import type { SessionWriter } from '../session-writer.ts';
import { TurnPrompts } from '../turn-prompts.ts';
import { tell, type SessionEvents, type WarnLog } from './config.ts';

const TURN_ENDS = new Set(['completed', 'failed', 'cancelled']);

/**
 * What each transition of the actor writes besides its snapshot: the history entry (with the prompt
 * of a turn it starts), the attempt counters, and the embedder's `turnEnded`, told once it is stored.
 * `restored`: the context of the snapshot the actor starts from (what had ended there was counted by the holder that wrote it).
 */
export function transitionRecorder(
  init: { sessionId: string; writer: SessionWriter; events: SessionEvents | undefined; warn: WarnLog },
  restored: SessionContext | null,
): (transition: Transition, snapshot: { context: SessionContext }) => void {
  const { sessionId, writer, events, warn } = init;
  const tally = new AttemptTally(restored);
  const prompts = new TurnPrompts(restored?.turnIndex ?? 0);
  return (transition, snapshot) => {
    const prompt = prompts.next(transition.event, snapshot.context);
    writer.history(prompt === null ? transition : { ...transition, prompt });
    for (const field of tally.ended(snapshot.context)) writer.count(field);
    recordEvents(writer, transition, snapshot.context, prompt !== null);
    // A takeover ends turns too (interrupted → failed, cancelInterrupted → cancelled): only a restore that re-reports
    // the state it was left in (from = to) was told already, by the holder that wrote it.
    if (events?.turnEnded !== undefined && TURN_ENDS.has(transition.to) && !rereported(transition)) {
      const { turnIndex, turn } = snapshot.context;
      const ended = {
        sessionId,
        turn: turnIndex,
        status: transition.to as 'completed' | 'failed' | 'cancelled',
        failureReason: turn?.failureReason ?? null,
        cancelReason: turn?.cancelReason ?? null,
      };
      // Told once the end is stored (with the write that records it): a listener that reads the session then sees it ended.
      writer.landed(() => tell(warn, () => events.turnEnded?.(ended)));
    }
  };
}

/** A restore re-reporting the state the session was left in (from = to): reported already by the holder that wrote it. */
function rereported(transition: Transition): boolean {
  return transition.event === 'session.restored' && transition.from === transition.to;
}

/** The webhook events a transition reports, recorded in the same write (webhooks/outbox.ts). */
function recordEvents(writer: SessionWriter, transition: Transition, context: SessionContext, started: boolean): void {
  // A restored attempt that ends its turn (interrupted → failed, no retry left) is an end like any other.
  if (rereported(transition)) return;
  if (started) writer.event('turn.started', context.turnIndex);
  if (TURN_ENDS.has(transition.to))
    writer.event(
      'turn.ended',
      context.turnIndex,
      { status: transition.to, failureReason: context.turn?.failureReason ?? null },
      true,
    );
  if (transition.to === 'parked' && transition.from !== 'parked') writer.event('session.parked', context.turnIndex);
}
