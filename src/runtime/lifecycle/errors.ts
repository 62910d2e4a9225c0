/** The session cannot take this request in its current state (being deleted, or active and not forced): HTTP 409. */
export class ConflictError extends Error {
  override readonly name = 'ConflictError';
  readonly code = 'SESSIOND_CONFLICT' as const;
}

/** A deployment limit would be exceeded; nothing was written. `limit` names it. HTTP 429 (queued prompts) or 409 (message log). */
export class QuotaError extends Error {
  override readonly name = 'QuotaError';
  readonly code = 'SESSIOND_QUOTA' as const;
  readonly limit: 'maxQueuedPrompts' | 'maxLogMessages';
  readonly max: number;
  readonly status: 429 | 409;
  constructor(limit: 'maxQueuedPrompts' | 'maxLogMessages', max: number, message: string) {
    super(message);
    this.limit = limit;
    this.max = max;
    this.status = limit === 'maxQueuedPrompts' ? 429 : 409;
  }
}
