/**
 * The stable `code` of each error the runtime throws at its callers. Recognise an error by its
 * code, not by `instanceof`: the code survives a process or realm boundary (a second copy of the
 * package, an error sent as JSON), a class does not. Contract: codes are never renamed.
 */
export const ERROR_CODES = {
  /** InputError: a bad field, named in `issues`; nothing was written. */
  input: 'SESSIOND_INPUT',
  /** NotFoundError: an unknown session id. */
  notFound: 'SESSIOND_NOT_FOUND',
  /** ConflictError: the session's state refuses the request (being deleted, active, an id that exists). */
  conflict: 'SESSIOND_CONFLICT',
  /** QuotaError: a deployment limit (`limit`, `max`); nothing was written. */
  quota: 'SESSIOND_QUOTA',
  /** ArchiveError: an archive `import` refuses; nothing was written. */
  archive: 'SESSIOND_ARCHIVE',
} as const;

export type ErrorCode = (typeof ERROR_CODES)[keyof typeof ERROR_CODES];

/** Whether `error` is a sessiond error with this code (by its `code` field: works across realms and copies). */
export function hasErrorCode(error: unknown, code: ErrorCode): error is Error & { code: ErrorCode } {
  return error instanceof Error && (error as { code?: unknown }).code === code;
}
