/**
 * Turns the cumulative text of assistant messages into deltas that are never
 * repeated, across messages: after a tool turn pi may start the next message
 * by replaying text already sent (the previous message's, or the whole run's).
 * While a new message's text could still be such a replay it is held back;
 * once it goes beyond the replayed text only the new part is released, and if
 * it turns out to be no replay, all of it is.
 *
 * Contract: the concatenation of everything returned equals the run's assistant
 * text with replayed prefixes removed; no character twice, none lost.
 */
export class TextDeltas {
  /** What the run's earlier messages released. */
  #runText = '';
  #previousText = '';
  #previousStop: string | null = null;
  /** The current message's text as far as released: one snapshot string, never a rope of slices of many. */
  #emitted = '';
  /** Where the current message's released text starts in `#emitted` (past a replayed prefix). */
  #releasedFrom = 0;
  #replayCandidates: string[] | null = null;

  startMessage(): void {
    // Fold the previous message into the run as one slice of its last snapshot: `runText += delta` on
    // every update would keep every line's snapshot alive (a delta is a slice of it) until the run ends.
    if (this.#emitted.length > this.#releasedFrom) this.#runText += this.#emitted.slice(this.#releasedFrom);
    this.#emitted = '';
    this.#releasedFrom = 0;
    this.#replayCandidates = null;
    if (this.#previousStop !== 'toolUse') return;
    const candidates = [this.#previousText, this.#runText].filter((c, i, all) => c.length > 0 && all.indexOf(c) === i);
    this.#replayCandidates = candidates.length > 0 ? candidates : null;
  }

  /** The new text of the current message, given its cumulative text so far. */
  update(text: string): string {
    if (this.#replayCandidates !== null) {
      if (this.#replayCandidates.some((c) => c.length >= text.length && c.startsWith(text))) return '';
      let replayed = '';
      for (const c of this.#replayCandidates) {
        if (text.startsWith(c) && c.length > replayed.length) replayed = c;
      }
      this.#replayCandidates = null;
      this.#emitted = replayed;
      this.#releasedFrom = replayed.length;
    }
    if (text.length <= this.#emitted.length) return '';
    // A snapshot that rewrote earlier text cannot be taken back: release only what lies beyond it.
    const delta = text.slice(this.#emitted.length);
    this.#emitted = text;
    return delta;
  }

  /**
   * Ends the current message with its final text; returns what of it was not yet released.
   * A message that ends while still inside a replay candidate is a replay only if it is the
   * whole candidate; a shorter one was new text that merely began the same way.
   */
  endMessage(text: string, stopReason: string | null): string {
    const held = this.#replayCandidates;
    let delta: string;
    if (held !== null && held.includes(text)) {
      this.#emitted = text;
      this.#releasedFrom = text.length;
      delta = '';
    } else {
      if (held !== null && held.some((c) => c.startsWith(text))) this.#replayCandidates = null;
      delta = this.update(text);
    }
    this.#replayCandidates = null;
    this.#previousText = text;
    this.#previousStop = stopReason;
    return delta;
  }
}
