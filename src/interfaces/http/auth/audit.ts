import type { Logger } from '../../log.ts';
import type { Principal } from './credentials.ts';

export interface AuditEntry {
  method: string;
  /** The route template (`/api/sessions/{id}/cancel`), or the raw path when no route matched. */
  route: string;
  sessionId: string | null;
  status: number;
  principal: Principal | null;
  /** Why a request was refused (`no token`, `invalid token`, `scope`, `host`, `origin`…). */
  reason?: string;
  client: string | null;
}

export type Outcome = 'ok' | 'refused' | 'rejected' | 'unavailable' | 'error';

export function outcomeOf(status: number): Outcome {
  if (status < 400) return 'ok';
  if (status === 401 || status === 403 || status === 421) return 'refused';
  if (status === 503) return 'unavailable';
  if (status >= 500) return 'error';
  return 'rejected';
}

/**
 * One structured line (`msg: "audit"`) per mutating request and per refused
 * one: who (the token's name and scope, never the token), what (method, route,
 * session id), the outcome and the client's address. Never a body, a query
 * string or a header value.
 */
export function writeAudit(logger: Logger, entry: AuditEntry): void {
  logger.info(
    {
      audit: true,
      tokenName: entry.principal?.name ?? null,
      scope: entry.principal?.scope ?? null,
      via: entry.principal?.via ?? null,
      method: entry.method,
      route: entry.route,
      sessionId: entry.sessionId,
      status: entry.status,
      outcome: outcomeOf(entry.status),
      ...(entry.reason === undefined ? {} : { reason: entry.reason }),
      client: entry.client,
    },
    'audit',
  );
}
