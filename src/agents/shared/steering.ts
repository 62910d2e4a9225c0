/**
 * Steering a running turn (issue 29): a prompt sent with `whenBusy: "steer"` while a turn runs is
 * accepted durably by the runtime and handed to the running attempt here. An agent whose provider
 * can put a text into its running turn through its own channel (pi's RPC `steer`, Claude Code's
 * stream-json input) declares `steering: 'native'` in its definition and reads `RunContext.steering`;
 * one that has such a channel only when its agent says so as it starts (an ACP agent's steering
 * extension) declares `steering: 'advertised'` and tells `RunContext.steeringNative` when it does.
 * For any other agent the runtime stops the attempt at its next tool boundary and continues the
 * same turn in a new attempt with the text (the fallback), and never passes a channel.
 */

/** One steering text accepted for the running turn. */
export interface Steer {
  /** The id the caller got when the steer was accepted (the log's `prompt.steered.promptId`). */
  readonly promptId: string;
  readonly text: string;
}

/** What the runtime gives a native provider for one attempt. */
export interface SteeringChannel {
  /**
   * The steers accepted for this turn and not yet delivered, oldest first, then each new one as it
   * is accepted. Ends when the attempt ends (or its signal aborts). A steer the attempt did not
   * deliver stays pending for the next attempt or turn: the runtime, not the provider, keeps it.
   */
  pending(): AsyncIterable<Steer>;
  /**
   * The agent took the text into its running turn (pi: it echoed the steer as a user message):
   * the runtime records `prompt.steered { via: "native" }` and forgets the steer. Only a steer
   * the agent shows it received is reported; one written to its input and never echoed is not.
   */
  delivered(promptId: string): void;
}
