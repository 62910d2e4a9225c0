import type { RetryPolicy, RetryPolicyResult } from '../../retry/index.ts';
import { NotFoundError } from '../../errors.ts';
import { checkSessionId, safeJson, type CallerParts } from './parts.ts';
import { mergeRetryPolicy } from '../../retry/policy.ts';
import { parkLimitIssues, turnLimitIssue } from '../deployment-policy.ts';

/** KEYS: meta. ARGV: policyJson. → 1 set | 0 no such session, or one being deleted. */
const SET_POLICY = `
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'deleting') == 1 then return 0 end
redis.call('HSET', KEYS[1], 'policy', ARGV[1])
return 1
`;

// The retry policy, global or one session's: read, set (within the deployment policy), reset.

export async function getPolicy(
  parts: CallerParts,
  sessionId?: string,
): Promise<{ policy: RetryPolicy; source: 'session' | 'global' | 'default' }> {
  if (sessionId !== undefined) {
    checkSessionId(sessionId);
    const meta = await parts.store.meta(sessionId);
    if (meta === null) throw new NotFoundError(`unknown session "${sessionId}"`);
    if (meta.policy) return { policy: safeJson(meta.policy) as RetryPolicy, source: 'session' };
  }
  const stored = await parts.redis.exists(parts.keys.policy);
  return { policy: await parts.policies.get(), source: stored ? 'global' : 'default' };
}

/** Validates `patch` over the policy in force; on error nothing is changed. */
export async function setPolicy(parts: CallerParts, patch: unknown, sessionId?: string): Promise<RetryPolicyResult> {
  // The deployment's maxTurnMs wins over any stored policy, the global one included.
  const deployment = await parts.deploymentPolicy();
  const overLimit = turnLimitIssue(patch, deployment, 'maxTurnMs');
  if (overLimit !== null)
    return { ok: false, errors: [{ field: 'maxTurnMs', message: `maxTurnMs: ${overLimit.message}` }] };
  const overPark = parkLimitIssues(patch, deployment, '');
  if (overPark.length > 0)
    return { ok: false, errors: overPark.map((i) => ({ field: i.field, message: `${i.field}: ${i.message}` })) };
  if (sessionId === undefined) {
    parts.policies.invalidate();
    const result = await parts.policies.update(patch);
    if (result.ok) await parts.bus.publish({ sessionId: '*', kind: 'policy' });
    return result;
  }
  const { policy } = await getPolicy(parts, sessionId);
  const result = mergeRetryPolicy(policy, patch);
  if (result.ok) {
    // Only into a session that still exists and is not being deleted (a bare HSET after a delete would leave half a session).
    const set = await parts.redis.eval(
      SET_POLICY,
      1,
      parts.store.key(sessionId, 'meta'),
      JSON.stringify(result.policy),
    );
    if (set === 0) throw new NotFoundError(`unknown session "${sessionId}"`);
    await parts.bus.publish({ sessionId, kind: 'policy' });
  }
  return result;
}

export async function resetPolicy(parts: CallerParts, sessionId?: string): Promise<RetryPolicy> {
  if (sessionId === undefined) {
    const policy = await parts.policies.reset();
    await parts.bus.publish({ sessionId: '*', kind: 'policy' });
    return policy;
  }
  checkSessionId(sessionId);
  if ((await parts.store.meta(sessionId)) === null) throw new NotFoundError(`unknown session "${sessionId}"`);
  await parts.redis.hdel(parts.store.key(sessionId, 'meta'), 'policy');
  await parts.bus.publish({ sessionId, kind: 'policy' });
  return (await getPolicy(parts, sessionId)).policy;
}
