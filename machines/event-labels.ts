import type { SessionEvent } from './types.ts';

/** Each event a session is sent, in words (the history keeps the machine's own name besides). */
const LABELS: Record<SessionEvent['type'], string> = {
  'session.prompt': 'a prompt arrived',
  'session.cancel': 'cancel requested',
  'session.policy': 'retry policy changed',
  'session.restored': 'taken over by a worker',
  'session.waiting': 'held by a fleet limit',
  'session.capacity': 'a fleet limit made room',
  'session.resume': 'resumed by an operator',
  'session.unqueue': 'a queued prompt removed',
  'turn.deadline': "the turn's time limit passed",
  'attempt.session': 'the agent named its session',
  'attempt.spawned': 'the agent started',
  'attempt.ended': 'the attempt ended',
};

/** What moved a session from `from`, in words: the machine's own events, and XState's timers and actors. */
export function eventLabel(event: string, from: string): string {
  if (event === 'xstate.init') return 'created';
  if (event.startsWith('xstate.after.')) {
    if (from === 'backoff') return 'the backoff ended';
    if (from === 'parked') return 'the quota wall lifted';
    return 'a timer fired';
  }
  if (event.startsWith('xstate.done.actor')) return 'the attempt ended';
  if (event.startsWith('xstate.error.actor')) return 'the attempt crashed';
  return Object.hasOwn(LABELS, event) ? LABELS[event as SessionEvent['type']] : event;
}
