import { agentPermissions } from '../agents/registry.ts';
import type { AgentRequest } from '../agents/registry.ts';
import type { MessageOf } from '../protocol/index.ts';
import {
  checkTurn,
  PolicySchema,
  resolvePolicy,
  type DeploymentPolicy,
  type PolicyInput,
  type PolicyIssue,
} from '../policy/index.ts';
import { DEFAULT_AGENT } from '../agents/default-agent.ts';
import { DEFAULT_RETRY_POLICY, type RetryPolicy } from '../retry/index.ts';
import { mergeRetryPolicy, parseRetryPolicy, RETRY_POLICY_FIELDS } from '../retry/policy.ts';
import { TurnOptionsSchema } from './turn-options.ts';

/** The deployment policy of a configuration (its `policy` and `workspace`). Throws PolicyError naming the field. */
export function deploymentPolicy(
  config: { policy?: PolicyInput; workspace?: string; agents?: Readonly<Record<string, unknown>> } = {},
): DeploymentPolicy {
  return resolvePolicy(
    PolicySchema.parse(config.policy ?? {}),
    agentPermissions(Object.keys(config.agents ?? {})),
    config.workspace ?? process.cwd(),
  );
}

export type AdmittedTurn =
  { ok: true; agent: string; options: Record<string, unknown> } | { ok: false; issues: PolicyIssue[] };

/**
 * A turn's options as a caller gave them (`agent` included), checked as a caller's (strict: no
 * `command`, `env` or `extraArgs`) and against the policy. The same check runs where a request
 * comes in and, on options read back from Redis, at the start of every attempt.
 */
export async function admitTurn(policy: DeploymentPolicy, raw: unknown, prompt?: string): Promise<AdmittedTurn> {
  const parsed = TurnOptionsSchema.safeParse(raw ?? {});
  if (!parsed.success)
    return {
      ok: false,
      issues: parsed.error.issues.map((i) => ({ field: ['options', ...i.path].join('.'), message: i.message })),
    };
  const { agent = DEFAULT_AGENT, ...turn } = parsed.data;
  const name = String(agent);
  const checked = await checkTurn(policy, name, turn, prompt);
  return checked.ok ? { ok: true, agent: name, options: checked.options } : checked;
}

/**
 * The options an attempt runs with: the host's default idle timeout, the admitted caller options
 * over it, and every other value the worker's host configured over those (a host value always wins).
 */
export function attemptOptions(
  host: Readonly<Record<string, unknown>>,
  admitted: Readonly<Record<string, unknown>>,
): AgentRequest['options'] {
  // `account` is the operator's label of the agent's credentials, for fleet limits: not an agent option.
  const { idleTimeoutMs, account: _account, ...pinned } = host;
  return { ...(idleTimeoutMs === undefined ? {} : { idleTimeoutMs }), ...admitted, ...pinned };
}

/** The terminal of an attempt whose stored request the worker refused (never started). */
export function refusedAttempt(issues: readonly PolicyIssue[]): MessageOf<'terminal.failed'> {
  return {
    type: 'terminal.failed',
    content: {
      text: `the stored request was refused at the worker: ${issues.map((i) => `${i.field}: ${i.message}`).join('; ')}`,
      category: 'bad_request',
      stderr: '',
      invalid_output_lines: [],
    },
  };
}

/**
 * The retry policy a turn runs under: the caller's, with the deployment's `maxTurnMs` over it (a
 * policy with no limit, or a longer one, gets the deployment's). The deployment always wins.
 */
export function boundedRetryPolicy(
  policy: RetryPolicy,
  deployment: Pick<DeploymentPolicy, 'maxTurnMs'> & Partial<Pick<DeploymentPolicy, 'maxParkMs' | 'rateLimitAttempts'>>,
): RetryPolicy {
  const max = deployment.maxTurnMs;
  const own = policy.maxTurnMs ?? 0;
  const patch: { -readonly [K in keyof RetryPolicy]?: RetryPolicy[K] } = {};
  if (max !== null && !(own > 0 && own <= max)) patch.maxTurnMs = max;
  // Quota walls: the deployment's longest park and its `counted` win too.
  const maxPark = deployment.maxParkMs ?? null;
  const ownPark = policy.maxParkMs ?? DEFAULT_RETRY_POLICY.maxParkMs;
  if (maxPark !== null && ownPark > maxPark) patch.maxParkMs = maxPark;
  if (deployment.rateLimitAttempts === 'counted' && policy.rateLimitAttempts !== 'counted')
    patch.rateLimitAttempts = 'counted';
  return Object.keys(patch).length === 0 ? policy : Object.freeze({ ...policy, ...patch });
}

/**
 * A session's stored retry policy as a worker reads it, checked again by the schema as a stored
 * request is (an import of an older sessiond, or a hand-edited Redis, may have stored anything): a
 * valid one as it is; otherwise each field the schema refuses (or that is missing) takes its value
 * in `fallback()` — the policy in force for sessions without one of their own — and an unreadable
 * one is `fallback()` whole. The deployment's bounds go over the result (boundedRetryPolicy).
 */
export async function storedRetryPolicy(raw: string, fallback: () => Promise<RetryPolicy>): Promise<RetryPolicy> {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    // As documented above: an unreadable stored policy is the one in force for sessions without one.
    return fallback();
  }
  const whole = parseRetryPolicy(value);
  if (whole.ok) return whole.policy;
  const base = await fallback();
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return base;
  const fields = new Map(
    Object.entries(value).filter(([name]) => (RETRY_POLICY_FIELDS as readonly string[]).includes(name)),
  );
  // Each round drops the fields at fault; a policy has a dozen fields, so this ends.
  for (let round = 0; round <= RETRY_POLICY_FIELDS.length; round += 1) {
    const merged = mergeRetryPolicy(base, Object.fromEntries(fields));
    if (merged.ok) return merged.policy;
    for (const error of merged.errors) fields.delete(error.field);
  }
  return base;
}

/**
 * A caller's retry-policy patch asking for more at quota walls than the deployment allows (a longer
 * `maxParkMs`, or `rateLimitAttempts: "free"` where the deployment counts them): the issues, else none.
 */
export function parkLimitIssues(
  patch: unknown,
  deployment: Partial<Pick<DeploymentPolicy, 'maxParkMs' | 'rateLimitAttempts'>>,
  prefix = 'retryPolicy.',
): PolicyIssue[] {
  if (typeof patch !== 'object' || patch === null) return [];
  const issues: PolicyIssue[] = [];
  const { maxParkMs, rateLimitAttempts } = patch as { maxParkMs?: unknown; rateLimitAttempts?: unknown };
  const max = deployment.maxParkMs ?? null;
  if (max !== null && typeof maxParkMs === 'number' && maxParkMs > max)
    issues.push({
      field: `${prefix}maxParkMs`,
      message: `${maxParkMs} is above this deployment's maximum of ${max} ms (policy.maxParkMs)`,
    });
  if (deployment.rateLimitAttempts === 'counted' && rateLimitAttempts === 'free')
    issues.push({
      field: `${prefix}rateLimitAttempts`,
      message: `"free" is not allowed: this deployment counts every attempt that ends on a quota wall (policy.rateLimitAttempts)`,
    });
  return issues;
}

/** A caller's retry-policy patch naming a `maxTurnMs` above the deployment's (or none at all, `0`, under a deployment limit): the issue, else null. */
export function turnLimitIssue(
  patch: unknown,
  deployment: Pick<DeploymentPolicy, 'maxTurnMs'>,
  field = 'retryPolicy.maxTurnMs',
): PolicyIssue | null {
  const max = deployment.maxTurnMs;
  if (max === null || typeof patch !== 'object' || patch === null || !('maxTurnMs' in patch)) return null;
  const value = (patch as { maxTurnMs?: unknown }).maxTurnMs;
  if (typeof value !== 'number') return null;
  if (value === 0)
    return { field, message: `0 (no limit) is not allowed: this deployment's maximum is ${max} ms (policy.maxTurnMs)` };
  if (value > max)
    return { field, message: `${value} is above this deployment's maximum of ${max} ms (policy.maxTurnMs)` };
  return null;
}
