import { channel } from 'node:diagnostics_channel';

/**
 * The stages of a cancel, from the worker's side, for measuring where its time goes
 * (`BENCH_CANCEL_STAGES=1 BENCH_QUEUE_PARTS=3 npm run bench -- queue`): nothing is published unless
 * someone subscribed to the channel, so the path pays one property read per stage otherwise.
 * - `bus`: the cancel's pub/sub event reached the holding worker;
 * - `applied`: the holder read the cancel request and the machine left `running` (the attempt's signal aborted);
 * - `signalled`: the agent got the stop's first signal; `exited`: it exited (or the grace ran out);
 * - `swept`: the stop's last stage (the cgroup, the tree by marker, group and parents) is done;
 * - `ended`: the attempt fully ended (its provider's teardown: the egress's listeners and temp dirs; the agent's
 *   state carried out; the fleet-limit hold given back): the machine may leave `cancelling` only then;
 * - `machine`: the session's machine reached `cancelled` (its snapshot is staged for the next write);
 * - `written`: the fenced write that records the `cancelled` state landed.
 */
export type CancelStage = 'bus' | 'applied' | 'signalled' | 'exited' | 'swept' | 'ended' | 'machine' | 'written';

export interface CancelStageEvent {
  /** The session id, or the agent's marker (which ends with `.<session id>`) for the stages of its process. */
  key: string;
  stage: CancelStage;
  /** performance.timeOrigin + performance.now(): milliseconds since the epoch, sub-millisecond. */
  at: number;
}

export const CANCEL_STAGES_CHANNEL = 'sessiond:cancel-stages';

const stages = channel(CANCEL_STAGES_CHANNEL);

export function cancelStage(key: string, stage: CancelStage): void {
  if (stages.hasSubscribers)
    stages.publish({ key, stage, at: performance.timeOrigin + performance.now() } satisfies CancelStageEvent);
}
