/**
 * sessiond's errors, in one module. Each has a stable string `code`: recognise an error by it
 * (`hasErrorCode(error, 'not_found')`), not by `instanceof`, which fails across a realm, a
 * second copy of the package or a process boundary (a serialised error keeps `code` and `name`).
 */

export const ERROR_CODES = [
  'invalid_input',
  'not_found',
  'conflict',
  'quota_exceeded',
  'stale_lease',
  'invalid_cursor',
  'invalid_archive',
  'invalid_config',
  'invalid_policy',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

export interface FieldIssue {
  field: string;
  message: string;
}

/** The base of every error of this module. Contract: `code` never changes for a given kind of error. */
export abstract class SessiondError extends Error {
  abstract readonly code: ErrorCode;
}

/** True when `error` is one of sessiond's errors with this code, from this realm or another. */
export function hasErrorCode<C extends ErrorCode>(error: unknown, code: C): error is ErrorByCode[C] {
  return (
    typeof error === 'object' &&
    error !== null &&
    (error as { code?: unknown }).code === code &&
    typeof (error as { message?: unknown }).message === 'string'
  );
}

/** A request's fields are invalid; `issues` name each field. Nothing was written. HTTP 400. */
export class InputError extends SessiondError {
  override readonly name = 'InputError';
  override readonly code = 'invalid_input';
  readonly issues: FieldIssue[];
  constructor(issues: FieldIssue[]) {
    super(issues.map((i) => `${i.field}: ${i.message}`).join('; '));
    this.issues = issues;
  }
}

/** No such session (or other named thing). HTTP 404. */
export class NotFoundError extends SessiondError {
  override readonly name = 'NotFoundError';
  override readonly code = 'not_found';
}

/** The session cannot take this request in its current state (being deleted, or active and not forced): HTTP 409. */
export class ConflictError extends SessiondError {
  override readonly name: string = 'ConflictError';
  override readonly code = 'conflict';
}

/**
 * A prompt sent with `whenBusy: "reject"` found the session busy (a turn runs or prompts wait); nothing
 * was written. A ConflictError (code `conflict`, HTTP 409, CLI exit 1) saying what it found.
 */
export class SessionBusyError extends ConflictError {
  override readonly name: string = 'SessionBusyError';
  /** The session's state when the prompt came (`running`, `backoff`, …, or `queued`). */
  readonly state: string;
  /** Prompts waiting for their turn then (the running turn not counted). */
  readonly waiting: number;
  constructor(sessionId: string, state: string, waiting: number) {
    super(
      `session "${sessionId}" is busy (${state}${waiting > 0 ? `, ${waiting} prompt${waiting === 1 ? '' : 's'} waiting` : ''}): the prompt was rejected (whenBusy "reject") and not stored`,
    );
    this.state = state;
    this.waiting = waiting;
  }
}

export type QuotaLimit =
  | 'maxQueuedPrompts'
  | 'maxLogMessages'
  | 'maxLogBytes'
  | 'maxSessions'
  | 'maxStreams'
  | 'maxSchedules'
  | 'maxSchedulesPerCaller';

/** A limit would be exceeded; nothing was written. `limit` names it. HTTP 429 (queued prompts, sessions or streams of a token) or 409 (message log). */
export class QuotaError extends SessiondError {
  override readonly name = 'QuotaError';
  override readonly code = 'quota_exceeded';
  readonly limit: QuotaLimit;
  readonly max: number;
  readonly status: 429 | 409;
  constructor(limit: QuotaLimit, max: number, message: string) {
    super(message);
    this.limit = limit;
    this.max = max;
    this.status = limit === 'maxLogMessages' || limit === 'maxLogBytes' ? 409 : 429;
  }
}

/** The holder's lease was taken over by another worker: it writes nothing more. */
export class StaleLeaseError extends SessiondError {
  override readonly name = 'StaleLeaseError';
  override readonly code = 'stale_lease';
  constructor(sessionId: string) {
    super(`session ${sessionId}: the lease was taken over by another worker; this holder writes nothing more`);
  }
}

/** A listing cursor that is not the `next` of an earlier page. */
export class CursorError extends SessiondError {
  override readonly name = 'CursorError';
  override readonly code = 'invalid_cursor';
}

/** An archive (export/import) that cannot be read; `line` is where, when known. Nothing was written. */
export class ArchiveError extends SessiondError {
  override readonly name = 'ArchiveError';
  override readonly code = 'invalid_archive';
  readonly line: number | null;
  constructor(message: string, line: number | null = null) {
    super(line === null ? `archive: ${message}` : `archive line ${line}: ${message}`);
    this.line = line;
  }
}

/** The configuration (file, environment, flags) is invalid; the message names the field and where it came from. */
export class ConfigError extends SessiondError {
  override readonly name = 'ConfigError';
  override readonly code = 'invalid_config';
}

/** The deployment policy is invalid; the message names the field. */
export class PolicyError extends SessiondError {
  override readonly name = 'PolicyError';
  override readonly code = 'invalid_policy';
}

interface ErrorByCode {
  invalid_input: InputError;
  not_found: NotFoundError;
  conflict: ConflictError;
  quota_exceeded: QuotaError;
  stale_lease: StaleLeaseError;
  invalid_cursor: CursorError;
  invalid_archive: ArchiveError;
  invalid_config: ConfigError;
  invalid_policy: PolicyError;
}
