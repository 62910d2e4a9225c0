import { callerIssues } from '../../../config/tokens.ts';
import { HttpError } from '../body.ts';
import type { Principal } from './credentials.ts';
import type { Auth } from './guard.ts';

/**
 * A create or prompt request as its credential may send it: a `tenant` other than the
 * credential's or a `priority` above its maxPriority is a 400 naming the field (nothing written);
 * an omitted tenant is the credential's, so limits by tenant apply to every caller. With the
 * token's session cap for `Runtime.enqueue` (`how.owner`).
 */
export function callerRequest<T extends { tenant?: string; priority?: number }>(
  auth: Auth,
  principal: Principal | null,
  body: T,
): { request: T & { tenant?: string }; how: { owner?: { name: string; maxSessions: number } } } {
  if (principal === null) return { request: body, how: {} };
  const issues = callerIssues(principal, body);
  if (issues.length > 0) throw new HttpError(400, 'invalid request', issues);
  const caps = auth.capsOf(principal);
  const how =
    caps === null || principal.name === null ? {} : { owner: { name: principal.name, maxSessions: caps.maxSessions } };
  return { request: { ...body, tenant: principal.tenant }, how };
}
