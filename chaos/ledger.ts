/**
 * What a scenario asked for: every prompt it enqueued (with the turn number `enqueue` returned and
 * a tag the fake agent writes into every answer), every cancel it sent, and what it expects of
 * each turn. The checks compare Redis against this.
 */
import type { Runtime } from '../src/runtime/runtime.ts';
import type { FailureCategory } from '../src/index.ts';
import { FAKE_MODEL } from './cluster.ts';

/** `ended`: any final state (a race decides which); otherwise exactly that one. */
export type TurnExpectation = 'completed' | 'failed' | 'cancelled' | 'ended';

export interface LedgerPrompt {
  turn: number;
  /** Unique per prompt; the fake agent starts each answer with `[tag]`. null for real pi turns. */
  tag: string | null;
  text: string;
  expect: TurnExpectation;
  /** For `failed`: the failure category the last attempt must have. */
  category?: FailureCategory;
  /** Exact number of attempts the turn must have taken (checked when it is the session's last turn). */
  attempts?: number;
}

export interface LedgerSession {
  sessionId: string;
  prompts: LedgerPrompt[];
  /** Real pi (no tags in its answers). */
  pi: boolean;
}

export interface PromptSpec {
  sessionId?: string;
  /** The fake agent's behaviour (`ok:500`, `crash@1`, …), or a plain prompt for real pi. */
  behaviour: string;
  pi?: boolean;
  expect?: TurnExpectation;
  category?: FailureCategory;
  attempts?: number;
  options?: Record<string, unknown>;
  retryPolicy?: Record<string, unknown>;
}

export class Ledger {
  readonly sessions = new Map<string, LedgerSession>();
  readonly #scenario: string;
  #tags = 0;
  #sessions = 0;

  constructor(scenario: string) {
    this.#scenario = scenario;
  }

  ids(): string[] {
    return [...this.sessions.keys()];
  }

  /** A new session id for this scenario. */
  newSessionId(): string {
    this.#sessions += 1;
    return `${this.#scenario}-${this.#sessions}-${Math.random().toString(36).slice(2, 6)}`;
  }

  /** Enqueues a prompt through `runtime` and records it. */
  async enqueue(
    runtime: Runtime,
    spec: PromptSpec,
    piOptions: Record<string, unknown> = {},
  ): Promise<{ sessionId: string; turn: number }> {
    const sessionId = spec.sessionId ?? this.newSessionId();
    const pi = spec.pi === true;
    this.#tags += 1;
    const tag = pi ? null : `${this.#scenario}.${this.#tags}`;
    const text = tag === null ? spec.behaviour : `${spec.behaviour} #${tag}`;
    const options = pi ? { ...piOptions, ...(spec.options ?? {}) } : { model: FAKE_MODEL, ...(spec.options ?? {}) };
    // Registered before the call: a check running meanwhile must know the session exists.
    const session = this.sessions.get(sessionId) ?? { sessionId, prompts: [], pi };
    this.sessions.set(sessionId, session);
    const result = await runtime.enqueue({
      sessionId,
      prompt: text,
      options,
      ...(spec.retryPolicy === undefined ? {} : { retryPolicy: spec.retryPolicy }),
    });
    session.prompts.push({
      turn: result.turn,
      tag,
      text,
      expect: spec.expect ?? 'ended',
      ...(spec.category === undefined ? {} : { category: spec.category }),
      ...(spec.attempts === undefined ? {} : { attempts: spec.attempts }),
    });
    session.prompts.sort((a, b) => a.turn - b.turn);
    return { sessionId, turn: result.turn };
  }

  async cancel(runtime: Runtime, sessionId: string, reason = 'chaos cancel'): Promise<void> {
    await runtime.cancel(sessionId, reason);
  }

  promptCount(): number {
    let n = 0;
    for (const s of this.sessions.values()) n += s.prompts.length;
    return n;
  }
}
