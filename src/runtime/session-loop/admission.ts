import { stateName, type SessionActor } from '../../../machines/restore.ts';
import type { CliMessage } from '../../protocol/index.ts';
import type { AdmissionGate } from '../limits/gate.ts';
import type { Hold, LimitKey, MatchValues } from '../limits/index.ts';
import { tokenCount, usageTotals } from '../usage/usage.ts';
import type { WarnLog } from './config.ts';

export interface AdmissionInit {
  sessionId: string;
  /** Fleet limits and paused dispatch (none: every attempt is admitted at once). */
  gate: AdmissionGate | undefined;
  /** Host options per agent: the host's pinned provider/model win over the caller's. */
  agentOptions: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
  /** A hold lapses with the lease (renewed with it). */
  holdTtlMs: number;
  /** The session's meta as last read (tenant, priority). */
  meta: () => Readonly<Record<string, string>>;
  warn: WarnLog;
}

/** The values fleet limits match an attempt on (the host's pinned provider/model win, as they do for the attempt). */
export function matchValues(
  agentOptions: AdmissionInit['agentOptions'],
  meta: Readonly<Record<string, string>>,
  options: Readonly<Record<string, unknown>>,
): MatchValues {
  const agent = typeof options.agent === 'string' ? options.agent : 'pi';
  const host = agentOptions[agent] ?? {};
  const text = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
  const values: MatchValues = { agent };
  const provider = text(host.provider) ?? text(options.provider);
  const model = text(host.model) ?? text(options.model);
  const account = text(host.account);
  const tenant = text(meta.tenant);
  if (provider !== undefined) values.provider = provider;
  if (model !== undefined) values.model = model;
  if (account !== undefined) values.account = account;
  if (tenant !== undefined) values.tenant = tenant;
  return values;
}

/**
 * Admission of one session's attempts under fleet limits and paused dispatch: the machine's
 * `admissionRequired` guard, the hold an admitted attempt takes (given back when it ends, renewed
 * with the lease), and the wait sets a session that could not start joins.
 */
export class Admission {
  readonly #init: AdmissionInit;
  /** The fleet-limit hold of the attempt admitted last (given back when that attempt ends). */
  #hold: Hold | null = null;
  /** The limit keys this session last waited on (it leaves their wait sets if it stops waiting otherwise). */
  #waitKeys: LimitKey[] | null = null;

  constructor(init: AdmissionInit) {
    this.#init = init;
  }

  #values(options: Readonly<Record<string, unknown>>): MatchValues {
    return matchValues(this.#init.agentOptions, this.#init.meta(), options);
  }

  /**
   * The machine's `admissionRequired` guard: the next attempt's agent is not one this worker offers,
   * a limit applies to it, or dispatch may be paused.
   */
  required(options: Readonly<Record<string, unknown>>): boolean {
    const gate = this.#init.gate;
    if (gate === undefined) return false;
    const values = this.#values(options);
    return !gate.offers(values.agent ?? 'pi') || gate.pausedLocally() || gate.limits.keysFor(values).length > 0;
  }

  /** The agent and model the current turn's attempts run with (the metrics' labels of its tokens). */
  usageLabels(options: Readonly<Record<string, unknown>>): { agent: string; model: string } {
    const values = this.#values(options);
    return { agent: values.agent ?? 'pi', model: values.model ?? 'default' };
  }

  /**
   * In `waiting`: takes the attempt's holds and lets it start (null), or says until when the session
   * parks. An attempt of an agent this worker does not offer is handed back first, before any limit is
   * asked: the session parks waiting for a worker that offers it (no attempt run, none counted).
   */
  async admit(actor: SessionActor): Promise<number | null> {
    const gate = this.#init.gate;
    const context = actor.getSnapshot().context;
    if (gate === undefined) {
      actor.send({ type: 'session.capacity' });
      return null;
    }
    const values = this.#values(context.turn?.options ?? {});
    const agent = values.agent ?? 'pi';
    const previous = context.waitingFor;
    if (!gate.offers(agent)) {
      const since = previous?.reason === 'agent' && previous.agent === agent ? previous.since : Date.now();
      await this.releaseHold(null);
      await gate.waitForAgent(this.#init.sessionId, agent, since);
      const until = Date.now() + gate.pollMs;
      actor.send({
        type: 'session.waiting',
        waitingFor: { limit: `agent:${agent}`, reason: 'agent', agent, since, until },
      });
      return until;
    }
    if (previous?.reason === 'agent' && previous.agent !== undefined) {
      // Found: the wake passes need not look at it again (one they make anyway finds it running).
      await gate
        .agentFound(this.#init.sessionId, previous.agent)
        .catch((error: unknown) => this.#init.warn('the session was not taken off its agent wait list', error));
    }
    const keys = gate.limits.keysFor(values);
    const priority = Number(this.#init.meta().priority ?? 0);
    await this.releaseHold(null);
    const admission = await gate.limits.acquire(this.#init.sessionId, keys, {
      priority: Number.isInteger(priority) ? priority : 0,
      holdTtlMs: this.#init.holdTtlMs,
      pollMs: gate.pollMs,
    });
    if (admission.ok) {
      this.#hold = admission.hold;
      this.#waitKeys = null;
      actor.send({ type: 'session.capacity' });
      return null;
    }
    this.#waitKeys = keys;
    actor.send({
      type: 'session.waiting',
      waitingFor: {
        ...admission.waitingFor,
        since: previous?.limit === admission.waitingFor.limit ? previous.since : Date.now(),
      },
    });
    return Math.max(Date.now(), admission.waitingFor.until);
  }

  /** Renewed with the session's lease: the hold of a worker that dies lapses with it. */
  renew(): void {
    const hold = this.#hold;
    const gate = this.#init.gate;
    if (hold !== null && gate !== undefined)
      gate.limits
        .renew(hold, this.#init.holdTtlMs)
        .catch((error: unknown) =>
          this.#init.warn('a fleet-limit hold was not renewed (it lapses with the lease)', error),
        );
  }

  /** The attempt's process tree is gone: its slot goes back, and whoever it makes room for is woken. */
  async releaseHold(terminal: CliMessage | null): Promise<void> {
    const hold = this.#hold;
    const gate = this.#init.gate;
    this.#hold = null;
    if (hold === null || gate === undefined) return;
    // A rate limit with a Retry-After pauses the starts of every session under the same keys until then.
    const retryAfter =
      terminal?.type === 'terminal.failed' && terminal.content.category === 'rate_limited'
        ? (terminal.content.retryAfterMs ?? 0)
        : 0;
    // The tokens it reported count against the keys' maxTokensPerMinute.
    const usage = terminal?.type === 'terminal.completed' ? usageTotals(terminal.content.usage) : null;
    const woken = await gate.limits
      .release(hold, retryAfter > 0 ? Date.now() + retryAfter : 0, usage === null ? 0 : tokenCount(usage))
      .catch((error: unknown) => {
        this.#init.warn('a fleet-limit hold was not given back (it lapses with the lease)', error);
        return [] as string[];
      });
    if (woken.length > 0) gate.wake(woken.filter((id) => id !== this.#init.sessionId));
  }

  /** The holder lets go: a hold still held (its attempt never ran) goes back, and a session that no longer waits leaves the wait sets. */
  async letGo(actor: SessionActor | null, stale: boolean): Promise<void> {
    const gate = this.#init.gate;
    if (gate === undefined) return;
    await this.releaseHold(null);
    const waiting = actor !== null && stateName(actor.getSnapshot().value) === 'waiting';
    if (this.#waitKeys !== null && !waiting && !stale) {
      await gate.limits
        .forget(this.#init.sessionId, this.#waitKeys)
        .catch((error: unknown) =>
          this.#init.warn("the session did not leave the limits' wait sets (a wake finds it gone)", error),
        );
    }
  }
}
