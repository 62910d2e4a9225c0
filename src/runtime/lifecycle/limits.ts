import { LIFECYCLE_DEFAULTS as DEFAULTS } from '../../config/defaults.ts';

/**
 * The deployment's limits on what sessions keep: set by the operator (config), never by a caller.
 * A caller may choose a session's retention at enqueue, within `maxRetentionMs`.
 */
export interface LifecycleLimits {
  /** A finished session is removed this long after it finished; 0 keeps sessions forever. */
  retentionMs: number;
  /** The longest retention a caller may ask for a session (0: no maximum, `0` = forever allowed). */
  maxRetentionMs: number;
  /** Prompts waiting in one session (not yet taken into a turn) at most. */
  maxQueuedPrompts: number;
  /** Messages stored in one session's log at most: the turn that reaches it ends failed (`quota`), later prompts are refused. */
  maxLogMessages: number;
  /** The largest archive an import reads (bytes): a larger one is refused, naming the limit. */
  maxArchiveBytes: number;
  /** The longest line of an archive (bytes): a longer one is refused, naming the line and the limit. */
  maxArchiveLineBytes: number;
  /** Bytes of message content stored in one session's log at most: as maxLogMessages, measured in bytes. */
  maxLogBytes: number;
}

export const LIFECYCLE_DEFAULTS: LifecycleLimits = DEFAULTS;
