import { realpath } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, resolve, sep } from 'node:path';
import type { DeploymentPolicy } from './schema.ts';
import { formatHostPattern, matchesHost, urlHostPort } from '../process/egress/host-pattern.ts';

export interface PolicyIssue {
  field: string;
  message: string;
}

export type PolicyCheck = { ok: true; options: Record<string, unknown> } | { ok: false; issues: PolicyIssue[] };

/**
 * Checks what a caller asked for (the agent and its turn options, and the prompt) against the
 * deployment policy. Returns the options the attempt may run with: the caller's, plus what the
 * policy imposes (the workspace as cwd when none is given, a restricted tool list, switches off,
 * the ladder's ceiling when the agent's own default lies above it).
 *
 * Contract: never throws; every refusal names the field and the rule that refused it, e.g.
 * `options.sandbox: "danger-full-access" is above this deployment's ceiling "workspace-write"`.
 * Run where a request comes in (nothing is written when it refuses) and again at every attempt.
 */
export async function checkTurn(
  policy: DeploymentPolicy,
  agent: string,
  options: Readonly<Record<string, unknown>>,
  prompt?: string,
): Promise<PolicyCheck> {
  const issues: PolicyIssue[] = [];
  const out: Record<string, unknown> = { ...options };
  if (prompt !== undefined && prompt.length > policy.maxPromptChars) {
    issues.push({
      field: 'prompt',
      message: `${prompt.length} characters is above this deployment's maximum of ${policy.maxPromptChars}`,
    });
  }
  const permissions = policy.agents.includes(agent) ? policy.permissions[agent] : undefined;
  if (permissions === undefined) {
    issues.push({
      field: 'options.agent',
      message: `"${agent}" is not an agent this deployment lets callers choose (allowed: ${policy.agents.join(', ')})`,
    });
    return { ok: false, issues };
  }
  const cwd = options.cwd;
  issues.push(...workspaceIssues(policy, options));
  if (cwd === undefined) out.cwd = policy.workspace;
  else if (policy.workspaces?.callerCwd === false)
    issues.push({
      field: 'options.cwd',
      message: 'callers may not name a cwd on this deployment (policy.workspaces.callerCwd is false)',
    });
  else {
    const problem = await outsideRoots(cwd, policy.workspaceRoots, 'policy.workspaceRoots');
    if (problem !== null) issues.push({ field: 'options.cwd', message: problem });
  }
  if (options.agentDir !== undefined) {
    const problem =
      policy.agentDirRoots.length === 0
        ? 'callers may not choose an agent dir on this deployment (policy.agentDirRoots names none)'
        : await outsideRoots(options.agentDir, policy.agentDirRoots, 'policy.agentDirRoots');
    if (problem !== null) issues.push({ field: 'options.agentDir', message: problem });
  }
  const idle = options.idleTimeoutMs;
  if (typeof idle === 'number' && idle > policy.maxIdleTimeoutMs) {
    issues.push({
      field: 'options.idleTimeoutMs',
      message: `${idle} is above this deployment's maximum of ${policy.maxIdleTimeoutMs} (policy.maxIdleTimeoutMs)`,
    });
  }
  const ladder = permissions.ladder;
  if (ladder !== undefined) {
    const value = options[ladder.option];
    const rank = (step: string) => ladder.steps.indexOf(step);
    if (value === undefined) {
      if (rank(ladder.defaultStep) > rank(ladder.ceiling)) out[ladder.option] = ladder.ceiling;
    } else if (typeof value !== 'string' || rank(value) === -1) {
      issues.push({ field: `options.${ladder.option}`, message: `must be one of ${ladder.steps.join(' < ')}` });
    } else if (rank(value) > rank(ladder.ceiling)) {
      issues.push({
        field: `options.${ladder.option}`,
        message: `"${value}" is above this deployment's ceiling "${ladder.ceiling}" (${ladder.steps.join(' < ')})`,
      });
    }
  }
  for (const list of permissions.lists) {
    const value = options[list.option];
    if (value === undefined) {
      if (list.absentMeansAll && list.allowed !== '*') out[list.option] = [...list.allowed];
      continue;
    }
    if (list.allowed === '*') continue;
    const items = Array.isArray(value) ? value : [value];
    items.forEach((item, i) => {
      if (typeof item !== 'string' || !(list.allowed as string[]).includes(item)) {
        const allowed = list.allowed as string[];
        issues.push({
          field: `options.${list.option}.${i}`,
          message: `${JSON.stringify(item)} is not allowed on this deployment (allowed: ${allowed.length === 0 ? 'none' : allowed.join(', ')})`,
        });
      }
    });
  }
  for (const sw of permissions.switches) {
    if (options[sw.option] !== undefined)
      issues.push({ field: `options.${sw.option}`, message: "is the deployment's to set, not a caller's" });
    if (!sw.enabled) out[sw.option] = false;
  }
  return issues.length === 0 ? { ok: true, options: out } : { ok: false, issues };
}

/** A caller's `options.workspace` against `policy.workspaces.repos` (exact, or a prefix ending in `/`). */
function workspaceIssues(policy: DeploymentPolicy, options: Readonly<Record<string, unknown>>): PolicyIssue[] {
  const ws = options.workspace;
  if (ws === undefined) return [];
  const issues: PolicyIssue[] = [];
  if (options.cwd !== undefined)
    issues.push({
      field: 'options.workspace',
      message: 'a session in a caller-named cwd has no workspace: name options.cwd or options.workspace, not both',
    });
  const repo = ws !== null && typeof ws === 'object' ? (ws as { repo?: unknown }).repo : undefined;
  const repos = policy.workspaces?.repos ?? [];
  const allowed = typeof repo === 'string' && repos.some((r) => repo === r || (r.endsWith('/') && repo.startsWith(r)));
  if (!allowed)
    issues.push({
      field: 'options.workspace.repo',
      message: `${JSON.stringify(repo)} is not a repository this deployment lets callers name (policy.workspaces.repos: ${repos.length === 0 ? 'none' : repos.join(', ')})`,
    });
  return issues;
}

/** Why `path` is not inside one of `roots` once symlinks are resolved; null when it is. */
async function outsideRoots(path: unknown, roots: readonly string[], setting: string): Promise<string | null> {
  if (typeof path !== 'string' || !isAbsolute(path)) return 'must be an absolute path';
  const real = await realPathOf(path);
  const realRoots = await Promise.all(roots.map(realPathOf));
  if (realRoots.some((root) => real === root || real.startsWith(root.endsWith(sep) ? root : root + sep))) return null;
  const via = real === resolve(path) ? '' : ` (it resolves to ${real})`;
  return `${JSON.stringify(path)}${via} is outside this deployment's allowed roots (${setting}: ${roots.join(', ')})`;
}

/** The path with every symlink resolved; the part that does not exist yet is kept as written. */
async function realPathOf(path: string): Promise<string> {
  const absolute = resolve(path);
  try {
    return await realpath(absolute);
  } catch {
    // Not there yet: the nearest existing parent is resolved instead.
    const parent = dirname(absolute);
    if (parent === absolute) return absolute;
    return join(await realPathOf(parent), basename(absolute));
  }
}

/**
 * A caller's per-session webhook URL against `policy.webhooks.hosts` (deny by default: the operator's list is the
 * only way in). Pure; never throws. Where the URL's address lies (loopback, private ranges) is checked again at each
 * delivery, as for the operator's webhooks (`webhookDelivery.allowAddresses`).
 */
export function webhookIssue(policy: Pick<DeploymentPolicy, 'webhookHosts'>, url: string): PolicyIssue | null {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    // Not a URL: refused with this field's message.
    return { field: 'webhook', message: 'must be an http:// or https:// URL' };
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    return { field: 'webhook', message: 'must be an http:// or https:// URL' };
  if (parsed.username !== '' || parsed.password !== '')
    return { field: 'webhook', message: 'must not carry a user name or password' };
  const hosts = policy.webhookHosts ?? [];
  const { host, port } = urlHostPort(parsed);
  if (hosts.some((p) => matchesHost(p, host, port))) return null;
  return {
    field: 'webhook',
    message: `${formatHost(host, port)} is not a host this deployment lets callers send webhooks to (policy.webhooks.hosts: ${hosts.length === 0 ? 'none' : hosts.map(formatHostPattern).join(', ')})`,
  };
}

function formatHost(host: string, port: number): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`;
}
