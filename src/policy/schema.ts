import { isAbsolute, resolve } from 'node:path';
import { z } from 'zod';
import type { PermissionKnobs } from './knobs.ts';
import { PolicyError } from '../errors.ts';
import { parseHostPattern, type HostPattern } from '../process/egress/host-pattern.ts';

/**
 * The deployment policy: what callers of this deployment (enqueue, the HTTP API) may choose.
 * The operator's word, read with the rest of the configuration (`policy` in the config file,
 * SESSIOND_POLICY as JSON, SESSIOND_WORKSPACE for the default root); a caller never overrides it.
 */
const PERMISSION = z.strictObject({
  /** The highest step of the agent's permission ladder a caller may ask for. */
  ceiling: z.string().min(1).optional(),
  /** Per list option (pi `tools`, Claude Code `allowedTools`): what a caller may list, or '*'. */
  allow: z.record(z.string(), z.union([z.literal('*'), z.array(z.string().min(1).max(500)).max(500)])).optional(),
  /** Switches of the agent turned on (e.g. pi `extensions`): off unless named here. */
  enable: z.array(z.string().min(1)).max(50).optional(),
});

/** A rule that answers a permission request without asking: every field given must match. */
const AUTO_ALLOW_RULE = z
  .strictObject({
    /** The agent (`acp:qwen`); any agent when absent. */
    agent: z.string().min(1).max(200).optional(),
    /** The tool's kind as the agent reports it (ACP: `read`, `search`, `fetch`, `think`, `edit`, `execute`…). */
    kind: z.string().min(1).max(100).optional(),
    /** The tool's name (ACP: its title when it has no name). */
    tool: z.string().min(1).max(500).optional(),
  })
  .refine((r) => r.kind !== undefined || r.tool !== undefined, 'must name a kind or a tool');

/** How permission requests of agents run in `ask` mode are answered (see src/runtime/approvals/). */
const APPROVALS = z.strictObject({
  /** A request nobody answered within this long is denied (`by: "deadline"`). */
  deadlineMs: z
    .number()
    .int()
    .min(1000)
    .max(7 * 86_400_000)
    .default(900_000),
  /** Requests these rules match are allowed at once (`by: "policy"`), without asking. */
  autoAllow: z.array(AUTO_ALLOW_RULE).max(100).default([]),
});

/** A host an attempt may reach through its egress proxy: `host`, `*.domain`, `host:port`, `[v6]:port` (no port: 443 and 80). */
const HOST_PATTERN = z
  .string()
  .max(300)
  .superRefine((value, ctx) => {
    const parsed = parseHostPattern(value);
    if (!parsed.ok) ctx.addIssue({ code: 'custom', message: parsed.error });
  });

/**
 * Where attempts may connect besides their model host (src/process/egress). The operator's alone:
 * no caller option widens it. `allow` holds for every agent; `agents.<name>.allow` adds to it for one.
 */
const NETWORK_AGENT = z.strictObject({
  /** Hosts this agent's attempts may reach besides `policy.network.allow` (the same patterns). */
  allow: z.array(HOST_PATTERN).max(200),
});

const NETWORK = z.strictObject({
  /** Hosts every agent's attempts may reach: `host`, `*.domain`, `host:port`, `[v6]:port` (no port: 443 and 80). */
  allow: z.array(HOST_PATTERN).max(200).default([]),
  /** Per agent, hosts its attempts may reach besides `allow`. */
  agents: z.record(z.string(), NETWORK_AGENT).default({}),
});

/**
 * What a prompt does when it arrives while a turn runs or prompts wait (`whenBusy` of enqueue):
 * `enqueue` waits its turn (the default), `steer` goes into the running turn, `interrupt` stops the
 * running turn and runs next, `reject` is refused, `rollback` interrupts and takes the turn back.
 */
export const WHEN_BUSY = ['enqueue', 'steer', 'interrupt', 'reject', 'rollback'] as const;
export type WhenBusy = (typeof WHEN_BUSY)[number];

const absolutePath = z
  .string()
  .min(1)
  .refine((p) => isAbsolute(p), 'must be an absolute path');

export const PolicySchema = z.strictObject({
  /** The agents callers may choose; '*' every agent of the registry. */
  agents: z.union([z.literal('*'), z.array(z.string().min(1)).min(1)]).default('*'),
  /** A requested cwd (symlinks resolved) must lie inside one of these; default: the workspace. */
  workspaceRoots: z.array(absolutePath).max(100).optional(),
  /** Workspaces (docs/workspaces.md): the source repositories callers may name, and whether they may name a cwd at all. */
  workspaces: z
    .strictObject({
      /** Repositories a caller may start a workspace from (`options.workspace.repo`): an exact URL or path, or a prefix ending in `/`. Default none. */
      repos: z
        .array(
          z
            .string()
            .min(1)
            .max(4096)
            .refine((r) => !r.startsWith('-'), 'must not start with -'),
        )
        .max(200)
        .default([]),
      /** false: callers may not name a cwd (every session gets a workspace). Default true (within workspaceRoots). */
      callerCwd: z.boolean().default(true),
    })
    .prefault({}),
  /** Where callers may point pi's `agentDir`; none by default (callers may not set it). */
  agentDirRoots: z.array(absolutePath).max(100).default([]),
  /** The longest idle timeout a caller may ask for, in ms. */
  maxIdleTimeoutMs: z.number().int().min(1000).max(86_400_000).default(3_600_000),
  /** The longest prompt a caller may send, in characters. */
  maxPromptChars: z.number().int().min(1).max(10_000_000).default(200_000),
  /** The longest wall-clock time of a turn (ms, at most 7 days): caps every retry policy's `maxTurnMs`, and applies to a turn that names none. */
  maxTurnMs: z.number().int().min(1000).max(604_800_000).optional(),
  /** The longest park at a quota wall (ms, at most 7 days): caps every retry policy's `maxParkMs` (0: a quota wall always ends the turn failed). */
  maxParkMs: z.number().int().min(0).max(604_800_000).optional(),
  /** `counted`: an attempt that ends on a quota wall always counts against maxAttempts, whatever a retry policy says. */
  rateLimitAttempts: z.enum(['free', 'counted']).optional(),
  /** The `whenBusy` strategies callers may use (default: all); `enqueue`, the default, is always among them. */
  whenBusy: z
    .array(z.enum(WHEN_BUSY))
    .min(1)
    .refine((list) => list.includes('enqueue'), 'must include "enqueue" (the default of a prompt that names none)')
    .optional(),
  /** Per agent: the ceiling of its permission knobs. */
  permissions: z.record(z.string(), PERMISSION).default({}),
  /** Tool approvals (agents in `ask` mode): the deadline and the rules that allow without asking. */
  approvals: APPROVALS.prefault({}),
  /** Egress of attempts: the hosts they may reach through the worker's proxy besides their model host. */
  network: NETWORK.prefault({}),
  /**
   * Per-session webhooks (`webhook` of enqueue, docs/operations/webhooks.md): the hosts a caller may name, as
   * `policy.network`'s patterns (`hooks.example.com`, `*.example.com`, `host:port`; no port: 443 and 80). Default
   * none: callers may name no webhook.
   */
  webhooks: z
    .strictObject({
      /** Hosts a session's `webhook` may name: `host`, `*.domain`, `host:port`, `[v6]:port` (no port: 443 and 80). */
      hosts: z.array(HOST_PATTERN).max(200).default([]),
    })
    .prefault({}),
  /** `required: true`: an attempt on a worker without a sandbox (mode `none`, see docs/sandbox.md) fails, category `startup`, instead of running unconfined. */
  sandbox: z
    .strictObject({
      /** An attempt on a worker whose sandbox mode is `none` fails (category `startup`) instead of running unconfined. */
      required: z.boolean().default(false),
    })
    .prefault({}),
});

export type ApprovalPolicy = z.output<typeof APPROVALS>;

export type PolicyInput = z.input<typeof PolicySchema>;

/** A policy checked against the agents it names, with every default filled in. */
export interface DeploymentPolicy {
  agents: string[];
  /** Where a session runs when its caller names no cwd. */
  workspace: string;
  workspaceRoots: string[];
  /** The repositories callers may start a workspace from, and whether they may name a cwd (absent: none, yes). */
  workspaces?: { repos: string[]; callerCwd: boolean };
  agentDirRoots: string[];
  maxIdleTimeoutMs: number;
  maxPromptChars: number;
  /** The longest wall-clock time of a turn, in ms; null: no deployment limit. */
  maxTurnMs: number | null;
  /** The longest park at a quota wall, in ms; null: no deployment limit. */
  maxParkMs: number | null;
  /** `counted`: quota walls always count against maxAttempts; `free` (the default): as each retry policy says. */
  rateLimitAttempts: 'free' | 'counted';
  /** The `whenBusy` strategies callers may use. Absent: all of them. */
  whenBusy?: WhenBusy[];
  /** Per allowed agent: its ladder and ceiling, what its lists may hold, its switches turned on. */
  permissions: Record<string, AgentPermissions>;
  /** Tool approvals: the deadline and the auto-allow rules. */
  approvals: ApprovalPolicy;
  /** Per allowed agent: the hosts its attempts may reach besides their model host (policy.network, global ∪ its own). */
  network: Record<string, HostPattern[]>;
  /** Attempts need a sandbox (bwrap or landlock): on a worker without one they fail. Absent: not required. */
  sandbox?: { required: boolean };
  /** The hosts a caller's per-session webhook may name (policy.webhooks.hosts); absent or empty: none. */
  webhookHosts?: HostPattern[];
}

export interface AgentPermissions {
  ladder?: { option: string; steps: string[]; defaultStep: string; ceiling: string };
  lists: Array<{ option: string; allowed: string[] | '*'; absentMeansAll: boolean }>;
  switches: Array<{ option: string; description: string; enabled: boolean }>;
}

/** Defined with every other error of sessiond in src/errors.ts. */
export { PolicyError };

/**
 * Checks `input` (already parsed by PolicySchema) against the agents' declared knobs and fills in
 * the defaults. Throws PolicyError naming the field (`policy.permissions.codex.ceiling: …`).
 */
export function resolvePolicy(
  input: z.output<typeof PolicySchema>,
  knobs: Readonly<Record<string, PermissionKnobs>>,
  workspace: string,
): DeploymentPolicy {
  const errors: string[] = [];
  const known = Object.keys(knobs);
  const agents = input.agents === '*' ? known : input.agents;
  for (const [i, name] of agents.entries())
    if (!known.includes(name)) errors.push(`policy.agents.${i}: unknown agent "${name}" (known: ${known.join(', ')})`);
  const permissions: Record<string, AgentPermissions> = {};
  for (const name of Object.keys(input.permissions))
    if (!known.includes(name)) errors.push(`policy.permissions.${name}: unknown agent (known: ${known.join(', ')})`);
  for (const name of agents.filter((a) => known.includes(a))) {
    const declared = knobs[name] ?? {};
    const given = input.permissions[name] ?? {};
    const at = `policy.permissions.${name}`;
    const out: AgentPermissions = { lists: [], switches: [] };
    if (declared.ladder !== undefined) {
      const { option, steps, defaultStep, defaultCeiling } = declared.ladder;
      const ceiling = given.ceiling ?? defaultCeiling;
      if (!steps.includes(ceiling))
        errors.push(`${at}.ceiling: must be one of ${steps.join(' < ')} (got "${ceiling}")`);
      out.ladder = { option, steps: [...steps], defaultStep, ceiling };
    } else if (given.ceiling !== undefined) errors.push(`${at}.ceiling: ${name} has no permission ladder`);
    const listOptions = (declared.lists ?? []).map((l) => l.option);
    for (const option of Object.keys(given.allow ?? {}))
      if (!listOptions.includes(option))
        errors.push(
          `${at}.allow.${option}: ${name} has no such list option (has: ${listOptions.join(', ') || 'none'})`,
        );
    for (const list of declared.lists ?? []) {
      const allowed = given.allow?.[list.option] ?? list.defaultAllowed;
      out.lists.push({
        option: list.option,
        allowed: allowed === '*' ? '*' : [...allowed],
        absentMeansAll: list.absentMeansAll,
      });
    }
    const switchOptions = (declared.switches ?? []).map((s) => s.option);
    for (const option of given.enable ?? [])
      if (!switchOptions.includes(option))
        errors.push(`${at}.enable: ${name} has no switch "${option}" (has: ${switchOptions.join(', ') || 'none'})`);
    for (const sw of declared.switches ?? [])
      out.switches.push({ ...sw, enabled: (given.enable ?? []).includes(sw.option) });
    permissions[name] = out;
  }
  for (const name of Object.keys(input.network.agents))
    if (!known.includes(name)) errors.push(`policy.network.agents.${name}: unknown agent (known: ${known.join(', ')})`);
  if (errors.length > 0) throw new PolicyError(errors.join('\n'));
  const network: Record<string, HostPattern[]> = {};
  for (const name of agents)
    network[name] = [...input.network.allow, ...(input.network.agents[name]?.allow ?? [])].map(hostPattern);
  const root = resolve(workspace);
  return {
    agents,
    workspace: root,
    workspaceRoots: (input.workspaceRoots ?? [root]).map((p) => resolve(p)),
    workspaces: { repos: [...input.workspaces.repos], callerCwd: input.workspaces.callerCwd },
    agentDirRoots: input.agentDirRoots.map((p) => resolve(p)),
    maxIdleTimeoutMs: input.maxIdleTimeoutMs,
    maxPromptChars: input.maxPromptChars,
    maxTurnMs: input.maxTurnMs ?? null,
    maxParkMs: input.maxParkMs ?? null,
    rateLimitAttempts: input.rateLimitAttempts ?? 'free',
    whenBusy: [...new Set(input.whenBusy ?? WHEN_BUSY)],
    permissions,
    approvals: { deadlineMs: input.approvals.deadlineMs, autoAllow: input.approvals.autoAllow.map((r) => ({ ...r })) },
    network,
    sandbox: { required: input.sandbox.required },
    webhookHosts: input.webhooks.hosts.map(hostPattern),
  };
}

/** A pattern the schema already checked. */
function hostPattern(text: string): HostPattern {
  const parsed = parseHostPattern(text);
  if (!parsed.ok) throw new PolicyError(`policy.network: ${parsed.error}`);
  return parsed.pattern;
}
