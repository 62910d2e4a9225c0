import { agentPermissions } from '../agents/registry.ts';
import type { AgentRequest } from '../agents/registry.ts';
import type { MessageOf } from '../protocol/index.ts';
import { checkTurn, PolicySchema, resolvePolicy, type DeploymentPolicy, type PolicyInput, type PolicyIssue } from '../policy/index.ts';
import { DEFAULT_AGENT } from '../agents/default-agent.ts';
import { TurnOptionsSchema } from './turn-options.ts';

/** The deployment policy of a configuration (its `policy` and `workspace`). Throws PolicyError naming the field. */
export function deploymentPolicy(config: { policy?: PolicyInput; workspace?: string; agents?: Readonly<Record<string, unknown>> } = {}): DeploymentPolicy {
  return resolvePolicy(PolicySchema.parse(config.policy ?? {}), agentPermissions(Object.keys(config.agents ?? {})), config.workspace ?? process.cwd());
}

export type AdmittedTurn = { ok: true; agent: string; options: Record<string, unknown> } | { ok: false; issues: PolicyIssue[] };

/**
 * A turn's options as a caller gave them (`agent` included), checked as a caller's (strict: no
 * `command`, `env` or `extraArgs`) and against the policy. The same check runs where a request
 * comes in and, on options read back from Redis, at the start of every attempt.
 */
export async function admitTurn(policy: DeploymentPolicy, raw: unknown, prompt?: string): Promise<AdmittedTurn> {
  const parsed = TurnOptionsSchema.safeParse(raw ?? {});
  if (!parsed.success) return { ok: false, issues: parsed.error.issues.map((i) => ({ field: ['options', ...i.path].join('.'), message: i.message })) };
  const { agent = DEFAULT_AGENT, ...turn } = parsed.data;
  const name = String(agent);
  const checked = await checkTurn(policy, name, turn, prompt);
  return checked.ok ? { ok: true, agent: name, options: checked.options } : checked;
}

/**
 * The options an attempt runs with: the host's default idle timeout, the admitted caller options
 * over it, and every other value the worker's host configured over those (a host value always wins).
 */
export function attemptOptions(host: Readonly<Record<string, unknown>>, admitted: Readonly<Record<string, unknown>>): AgentRequest['options'] {
  // `account` is the operator's label of the agent's credentials, for fleet limits: not an agent option.
  const { idleTimeoutMs, account: _account, ...pinned } = host;
  return { ...(idleTimeoutMs === undefined ? {} : { idleTimeoutMs }), ...admitted, ...pinned };
}

/** The terminal of an attempt whose stored request the worker refused (never started). */
export function refusedAttempt(issues: readonly PolicyIssue[]): MessageOf<'terminal.failed'> {
  return {
    type: 'terminal.failed',
    content: { text: `the stored request was refused at the worker: ${issues.map((i) => `${i.field}: ${i.message}`).join('; ')}`, category: 'bad_request', stderr: '', invalid_output_lines: [] },
  };
}
