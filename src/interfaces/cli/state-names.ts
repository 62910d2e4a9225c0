/**
 * The session states `list --state` offers, for its help and choices without loading the machine
 * (machines/states.ts imports it; `sessiond --help` should not). test/machines/states.test.ts keeps
 * this list equal to the machine's own states plus `queued`.
 */
export const LIST_STATES = [
  'queued',
  'idle',
  'running',
  'backoff',
  'parked',
  'waiting',
  'cancelling',
  'interrupted',
  'cancelInterrupted',
  'completed',
  'failed',
  'cancelled',
] as const;
