import type { CliMessage } from '../../protocol/index.ts';
import type { Steer, SteeringChannel } from '../shared/steering.ts';

/**
 * The ACP steering extension (issue 29): ACP itself has no method to put a message into a running prompt yet (the
 * RFD proposes `session/inject`, agentclientprotocol/agent-client-protocol#1261), but an agent may offer this
 * extension request, advertised by `_meta.steering.supported: true` in its `initialize` answer (the Claude Code
 * adapter, claude-agent-acp, does).
 */
export const STEER_METHOD = '_session/steering';

/** The opt-in that makes an agent whose prompt already ended answer `promptRequired` instead of starting a turn of its own. */
const IDLE_BEHAVIOR = { steering: { idleBehavior: 'promptRequired' } } as const;

/** True when an `initialize` answer advertises the steering extension. */
export function advertisesSteering(answer: { _meta?: unknown }): boolean {
  const meta = answer._meta as { steering?: { supported?: unknown } } | null | undefined;
  return meta?.steering?.supported === true;
}

/**
 * Puts the running turn's steers into an ACP agent's prompt through the steering extension, one request at a time,
 * oldest first, and tells the runtime each one the agent took.
 *
 * When: only while the prompt is in flight (sent, and the agent has reported on it since) and no tool call of it is
 * open. The Claude Code adapter injects a steer at once (its CLI's priority `now`): during a model request it aborts
 * that request and makes it again with the steer; during a tool call it moves the tool to the background and goes on
 * without its result (measured with 0.101 and Claude Code 2.1.332: `backgroundedToDeliverMessage`), and the tool
 * then outlives the turn. Held while a call is open, a steer goes in once the tool's result is there: the safe point
 * of the fallback and of pi.
 *
 * Delivered: the agent answered `injected`. The adapter then ends the prompt only once a result of the steered work
 * came (its `steeredEchoes`: claude-agent-acp#934, a prompt that answered `end_turn` while its steer was still to
 * run, is what that guards against). Any other answer (`promptRequired`: the prompt ended first; `startedNewTurn`: an
 * agent that ignores the opt-in) or an error delivers nothing and sends no more steers in this attempt: they stay
 * pending in the runtime, which makes them the next turn. Never throws.
 */
export class AcpSteering {
  readonly #channel: SteeringChannel;
  readonly #send: (steer: Steer, meta: typeof IDLE_BEHAVIOR) => Promise<unknown>;
  readonly #open = new Set<string>();
  readonly #queue: Steer[] = [];
  #reading = false;
  /** The prompt is in flight and the agent has reported on it. */
  #live = false;
  /** No more steers go out (the prompt ended, the attempt is leaving, or one was refused). */
  #stopped = false;
  #sending: Promise<void> | null = null;

  constructor(channel: SteeringChannel, send: (steer: Steer, meta: typeof IDLE_BEHAVIOR) => Promise<unknown>) {
    this.#channel = channel;
    this.#send = send;
  }

  /** The agent advertised the extension: the runtime's steers are read from now on. */
  start(): void {
    if (this.#reading) return;
    this.#reading = true;
    void (async () => {
      for await (const steer of this.#channel.pending()) {
        this.#queue.push(steer);
        this.#pump();
      }
    })();
  }

  /** The agent reported on the prompt sessiond sent: it is in flight, a steer can join it. */
  live(): void {
    this.#live = true;
    this.#pump();
  }

  /**
   * Messages of the prompt as the agent sends them: a tool call is open from then on (the sooner a steer is held,
   * the fewer reach a running tool).
   */
  arrived(messages: readonly CliMessage[]): void {
    for (const message of messages) if (message.type === 'tool.call') this.#open.add(message.content.toolCallId);
  }

  /**
   * Each message of the prompt, in order, once the runtime took it: a call is closed only then, so that a steer
   * sent at its end is logged after its result.
   */
  taken(message: CliMessage): void {
    if (message.type !== 'tool.completed' && message.type !== 'tool.failed') return;
    this.#open.delete(message.content.toolCallId);
    this.#pump();
  }

  /** No more steers go out; resolves once the one in flight (if any) is answered, or `gone` resolves. */
  async stop(gone: Promise<unknown>): Promise<void> {
    this.#stopped = true;
    if (this.#sending !== null) await Promise.race([this.#sending, gone]);
  }

  #pump(): void {
    if (this.#sending !== null || this.#stopped || !this.#live || this.#open.size > 0) return;
    const steer = this.#queue.shift();
    if (steer === undefined) return;
    this.#sending = this.#deliver(steer).finally(() => {
      this.#sending = null;
      this.#pump();
    });
  }

  async #deliver(steer: Steer): Promise<void> {
    let answer: unknown;
    try {
      answer = await this.#send(steer, IDLE_BEHAVIOR);
    } catch {
      // Refused or the agent is gone: not delivered, it stays pending in the runtime (the next attempt or turn).
      this.#stopped = true;
      return;
    }
    if ((answer as { outcome?: unknown } | null)?.outcome === 'injected') this.#channel.delivered(steer.promptId);
    else this.#stopped = true;
  }
}
