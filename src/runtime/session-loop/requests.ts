import { stateName } from '../../../machines/restore.ts';
import { cancelStage } from '../../process/cancel-stages.ts';
import type { RetryPolicy } from '../../retry/index.ts';
import type { DeploymentPolicy } from '../../policy/index.ts';
import { boundedRetryPolicy, storedRetryPolicy } from '../deployment-policy.ts';
import { consumeResume, RESUME_FIELD, wallToken } from '../resume-parked.ts';
import type { LoadedSession } from '../store/session-store.ts';
import type { WarnLog } from './config.ts';
import type { HeldSession } from './lease.ts';
import { ROLLBACK_FIELD } from '../workspace-turns.ts';

/**
 * A cancel, as the holder receives it: the persisted request (read with the lease, or from Redis)
 * becomes the machine's `session.cancel`; leaving `running` aborts the attempt's signal
 * (machines/attempt-actor.ts), which stops the agent's process tree.
 */
export class CancelRequests {
  /** Used once instead of reading it again: the cancel flag read with the lease (undefined: read Redis). */
  #loaded: LoadedSession['cancel'] | undefined;

  constructor(loaded: LoadedSession['cancel'] | undefined) {
    this.#loaded = loaded;
  }

  /**
   * `answered`: the `turn/attempt` whose agent already reported its turn completed (see message-sink.ts),
   * read after the cancel request is: the answer may reach the sink while that read is in flight.
   */
  async apply(held: HeldSession, answered: () => string | null): Promise<void> {
    const loaded = this.#loaded;
    this.#loaded = undefined;
    const request = loaded !== undefined ? loaded : await held.store.cancelRequest(held.sessionId);
    const actor = held.fenced.actor;
    if (request === null || actor === null) return;
    const snapshot = actor.getSnapshot();
    // The agent has already answered (its terminal.completed is in the log) and its attempt is only
    // cleaning up: there is nothing left to cancel. Cancelled now, the turn would end `cancelled`
    // with a completed answer in its log.
    const done =
      stateName(snapshot.value) === 'running' &&
      answered() === `${snapshot.context.turnIndex}/${snapshot.context.attempt}`;
    // A cancel meant for one turn (an interrupting prompt's, caller/enqueue.ts) is dropped once
    // another turn is in progress: the turn it was meant for has ended, and the next one is not its target.
    const elsewhere = typeof request.turn === 'number' && request.turn !== snapshot.context.turnIndex;
    if (!done && !elsewhere) {
      actor.send({ type: 'session.cancel', reason: request.reason });
      cancelStage(held.sessionId, 'applied');
    }
    // whenBusy "rollback": the turn is taken back when the next one starts (rollback.ts), told in this same write.
    if (!done && !elsewhere && request.rollback === true && typeof request.turn === 'number')
      held.fenced.writer.agentState(ROLLBACK_FIELD, JSON.stringify({ turn: request.turn, at: Date.now() }));
    held.fenced.writer.cancelHandled();
    held.fenced.persist();
  }
}

/** Applies an operator's resume to the quota wall it was asked for; one meant for a wall already left is dropped. */
export async function applyResume(held: HeldSession, warn: WarnLog): Promise<void> {
  const actor = held.fenced.actor;
  if (actor === null) return;
  const requested = await held.store.redis.hget(held.store.key(held.sessionId, 'meta'), RESUME_FIELD);
  if (requested === null) return;
  const snapshot = actor.getSnapshot();
  if (stateName(snapshot.value) === 'parked' && requested === wallToken(snapshot.context))
    actor.send({ type: 'session.resume' });
  await consumeResume(held.store, held.sessionId, requested).catch((error: unknown) =>
    warn('a handled resume request was not cleared (the next look drops it)', error),
  );
}

/** The retry policy the session's turns run under: its own or the global one, within the deployment's maxTurnMs. */
export class TurnPolicy {
  readonly #global: () => Promise<RetryPolicy>;
  readonly #deployment: DeploymentPolicy;

  constructor(global: () => Promise<RetryPolicy>, deployment: DeploymentPolicy) {
    this.#global = global;
    this.#deployment = deployment;
  }

  async of(meta: Readonly<Record<string, string>>): Promise<RetryPolicy> {
    const override = meta.policy;
    // The stored policy is checked again by its schema, as a stored request is (an archive may have carried it).
    const policy =
      override !== undefined && override !== ''
        ? await storedRetryPolicy(override, () => this.#global())
        : await this.#global();
    return boundedRetryPolicy(policy, this.#deployment);
  }

  /** The session's or the global policy changed: the meta is read again and the actor told. */
  async apply(held: HeldSession): Promise<void> {
    held.meta = (await held.store.meta(held.sessionId)) ?? held.meta;
    this.sync(held, await this.of(held.meta));
  }

  sync(held: HeldSession, policy: RetryPolicy): void {
    const actor = held.fenced.actor;
    if (actor === null) return;
    const current = actor.getSnapshot().context.policy;
    if (current !== policy && JSON.stringify(current) !== JSON.stringify(policy)) {
      actor.send({ type: 'session.policy', policy });
    }
  }
}
