import { TOKEN_DEFAULTS } from './defaults.ts';

/**
 * Who a caller is beyond its scope: the tenant its sessions are recorded under and the highest
 * priority it may ask for. Plain code, no schema (the CLI reads it for every enqueue). A token
 * names its own (src/config/tokens.ts); the local caller's is config `caller`.
 */
export interface CallerIdentity {
  tenant: string;
  maxPriority: number;
}

/** The local caller when the configuration says nothing (config `caller`). */
export const DEFAULT_CALLER: CallerIdentity = {
  tenant: TOKEN_DEFAULTS.localTenant,
  maxPriority: TOKEN_DEFAULTS.localMaxPriority,
};

/**
 * What a request may not claim beyond its caller's identity: another tenant (`tenant`), a priority
 * above the caller's highest (`priority`). Each issue names its field; none: the request may go on,
 * with the caller's tenant filled in where it named none.
 */
export function callerIssues(
  caller: CallerIdentity,
  request: { tenant?: unknown; priority?: unknown },
): Array<{ field: string; message: string }> {
  const issues: Array<{ field: string; message: string }> = [];
  if (request.tenant !== undefined && request.tenant !== caller.tenant) {
    issues.push({
      field: 'tenant',
      message: `this credential's tenant is ${JSON.stringify(caller.tenant)}: a request may not name another (omit tenant)`,
    });
  }
  if (typeof request.priority === 'number' && request.priority > caller.maxPriority) {
    issues.push({
      field: 'priority',
      message: `must be at most ${caller.maxPriority} for this credential (its maxPriority)`,
    });
  }
  return issues;
}
