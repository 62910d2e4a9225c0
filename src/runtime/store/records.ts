import type { UsageRecord } from '../usage/usage.ts';

/* What a session's keys hold, as the store reads and writes it, and how a Redis reply becomes one. */

export interface InboxPrompt {
  id: string;
  text: string;
  options: Record<string, unknown>;
  enqueuedAt: number;
  /** An operator's retry of this failed turn (see retry-turn.ts). */
  retryOf?: number;
  /** A tombstone: an operator removed this prompt (see queued-prompts.ts); every reader skips it. */
  removed?: boolean;
}

/**
 * A steer accepted for a running turn and not delivered yet (whenBusy "steer"): the prompt as it was accepted
 * (its `id` is the caller's promptId, `enqueuedAt` when it was accepted), and `raw`, its stored JSON (what a
 * write names to remove it).
 */
export interface PendingSteer {
  prompt: InboxPrompt;
  raw: string;
}

/** The pending steers as stored (JSON each), oldest first. */
export function parseSteers(raws: readonly string[]): PendingSteer[] {
  return raws.map((raw) => ({ prompt: JSON.parse(raw) as InboxPrompt, raw }));
}

export interface StoredMessage {
  seq: number;
  turn: number;
  attempt: number;
  type: string;
  content: unknown;
}

export interface WriteBatch {
  /** The holder's number for this batch (increasing): a batch sent again after it landed writes nothing (see WRITE). */
  writeId?: number;
  snapshot?: string;
  state?: string;
  inboxTrim?: number;
  clearCancel?: boolean;
  history?: string[];
  agentState?: Array<[string, string]>;
  messages?: Array<{ turn: number; attempt: number; type: string; content: string }>;
  /** Increments of the session's counters (field → n), applied once with the batch (see metrics/counters.ts). */
  counters?: Array<[string, number]>;
  /** Token usage of the attempts whose terminal messages are in this batch (counted in the meta by the same write). */
  usage?: UsageRecord[];
  /** The current turn's trace context (JSON, tracing/trace-context.ts), stored in the meta's `trace`. */
  trace?: string;
  /** Webhook events this batch reports (webhooks/outbox.ts), recorded with it in the session's outbox. */
  outbox?: Array<{ id: string; body: string }>;
  /** Give the lease back once the batch is written (see WRITE in scripts.ts). */
  release?: 'idle' | 'keep';
  /** Pending steers this batch delivers (their stored JSON): removed in the same call as its messages. */
  steersDelivered?: string[];
}

/** released: 1 the lease was given back, 0 not (idle: prompts or a cancel are waiting), null: not asked. */
export interface WriteResult {
  lastSeq: number;
  released: 1 | 0 | null;
}

/** What a new holder reads to start, fetched with the lease. */
export interface LoadedSession {
  meta: Record<string, string>;
  snapshot: string | null;
  inbox: InboxPrompt[];
  cancel: CancelRequest | null;
}

export type AcquireResult =
  | { ok: true; token: string; fence: number; loaded: LoadedSession }
  | { ok: false; reason: 'busy'; retryInMs: number; holder: string }
  | { ok: false; reason: 'unknown_session' };

/** What an enqueue may refuse (nothing is written then). */
/**
 * A cancel asked for a session (its `cancel` key). `turn`: only that turn is meant (a prompt sent with whenBusy
 * interrupt or rollback asked it): a holder that finds another turn in progress drops it; `rollback`: that turn
 * is taken back once cancelled.
 */
export interface CancelRequest {
  reason: string;
  at: number;
  turn?: number;
  rollback?: boolean;
}

export interface EnqueueLimits {
  /** Refuse an unknown session instead of creating it. */
  mustExist?: boolean;
  /** Prompts waiting (not yet taken into a turn) at most; 0: no limit. */
  maxQueued?: number;
  /** Messages stored at most; a session whose log is full takes no prompt. 0: no limit. */
  maxLog?: number;
  /** Bytes of message content stored at most (the meta's `logBytes`); as maxLog. 0: no limit. */
  maxLogBytes?: number;
  /** The session's own retention (ms, 0: forever), recorded with it. */
  retentionMs?: number;
  /** The session's priority from this prompt on (higher starts first under a limit or a full fleet). */
  priority?: number;
  /** What the prompt does when the session is busy (absent: `enqueue`); see EnqueueRequest.whenBusy. */
  whenBusy?: string;
  /** The session's own webhook from this prompt on, and the secret its deliveries are signed with. */
  webhook?: { url: string; secret: string };
}

export type EnqueueResult =
  | {
      ok: true;
      turn: number;
      created: boolean;
      jobId: string | null;
      priority: number;
      shard: number;
      /** The turn this prompt asked to be cancelled (whenBusy interrupt/rollback), null when none was. */
      interrupted: number | null;
      /** The session's activation job (the new one, or the one it already had). */
      activeJobId: string;
      /** whenBusy "steer" found a turn in progress: the prompt is a pending steer of `turn` (not a new turn). */
      steered: boolean;
    }
  | { ok: false; reason: 'unknown_session' }
  | { ok: false; reason: 'busy'; state: string; waiting: number }
  | { ok: false; reason: 'deleting' }
  | { ok: false; reason: 'queue_full'; limit: number; count: number }
  | { ok: false; reason: 'log_full'; limit: number; count: number }
  | { ok: false; reason: 'log_bytes_full'; limit: number; count: number };

/** The replies of a session's read-only MULTI, by position; a failed command's error is thrown. */
export function multiValues(replies: Array<[Error | null, unknown]> | null, sessionId: string): (i: number) => unknown {
  if (replies === null) throw new Error(`session ${sessionId}: the read was aborted`);
  return (i) => {
    const [error, result] = replies[i] ?? [null, null];
    if (error !== null) throw error;
    return result;
  };
}

export function parseEntry(fields: string[]): StoredMessage {
  const record: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) record[fields[i] as string] = fields[i + 1] as string;
  let content: unknown = null;
  try {
    content = JSON.parse(record.content ?? 'null');
  } catch {
    // A content that is not JSON is returned as the text it is.
    content = record.content ?? null;
  }
  return {
    seq: Number(record.seq),
    turn: Number(record.turn),
    attempt: Number(record.attempt),
    type: record.type ?? '',
    content,
  };
}
