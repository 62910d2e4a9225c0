import { clientSettingsOf } from '../../../config/client-settings.ts';
import { loadConfig, workspaceConfig, type Config } from '../../../config/config.ts';
import { createReader } from '../../../api/reader.ts';
import type { DeploymentPolicy } from '../../../policy/index.ts';
import type { WorkerHeartbeat } from '../../../runtime/caller/types.ts';
import { deploymentPolicy } from '../../../runtime/deployment-policy.ts';
import { createRedis, redactUrl } from '../../../runtime/redis/index.ts';
import { readAgentWaits, type AgentWait } from '../../../runtime/agent-waits.ts';
import { createKeys } from '../../../runtime/keys.ts';
import { isLive, offersAgent, workerStaleMs } from '../../../runtime/worker-liveness.ts';
import { WORKSPACES_OFF_HINT } from '../../../runtime/workspace-git.ts';
import { probeGit } from '../../../workspace/index.ts';
import { REDIS_FIXES, REDIS_REACH_MS } from '../reach-redis.ts';
import { resolveRedisUrl } from '../resolve-redis.ts';
import { describeAgents, type AgentRow } from './agents-action.ts';
import { withTimeout } from '../../with-timeout.ts';

/** Something `doctor` found wrong, and what to do about it. */
export interface Finding {
  what: string;
  fix: string;
}

/** What `sessiond doctor --json` prints. */
export interface DoctorReport {
  /** The configuration could not be read: nothing else was looked at. */
  configuration: { ok: true } | { ok: false; error: string };
  redis: {
    /** Password masked. */
    url: string | null;
    reachable: boolean;
    version?: string;
    mode?: string;
  };
  /** Every worker with a heartbeat in Redis; `live`: seen within workerStaleMs of the configured heartbeat (as `/readyz`). */
  workers: Array<WorkerHeartbeat & { live: boolean; lastSeenMsAgo: number }>;
  /** Sessions handed back by the workers that took them, waiting for a worker offering their agent, by agent. */
  agentWaits: AgentWait[];
  /** This host's agents: their CLIs found or not, versions. */
  agents: AgentRow[];
  /**
   * Per-session workspaces in this host's configuration, and this host's git (`git --version`, or why
   * it cannot run): a worker here with workspaces on refuses to start without it.
   */
  workspaces: {
    enabled: boolean;
    root?: string;
    store?: string;
    git: { ok: true; version: string } | { ok: false; reason: string };
  };
  /** The deployment policy in force on this host's configuration, null when it is invalid (see problems). */
  policy: DeploymentPolicy | null;
  problems: Finding[];
}

/** Redis's version and mode (`INFO server`), null when it does not answer within REDIS_REACH_MS. */
async function redisFacts(url: string): Promise<{ version: string; mode: string } | { error: string }> {
  let last = 'no answer';
  const redis = createRedis(url, { role: 'doctor', maxRetriesPerRequest: 1, log: () => undefined });
  redis.on('error', (error: Error) => {
    last = (error as NodeJS.ErrnoException).code ?? error.message;
  });
  try {
    const info = await withTimeout(
      redis.info('server').catch((error: Error) => `error:${error.message}`),
      REDIS_REACH_MS,
    );
    if (info === null) return { error: `no answer within ${REDIS_REACH_MS / 1000} s (${last})` };
    // A connection error is said by its code (ECONNREFUSED…), not by ioredis's retry counter.
    if (info.startsWith('error:')) return { error: last === 'no answer' ? info.slice('error:'.length) : last };
    const field = (name: string) => new RegExp(`^${name}:(.*)$`, 'm').exec(info)?.[1]?.trim() ?? 'unknown';
    return { version: field('redis_version'), mode: field('redis_mode') };
  } finally {
    redis.disconnect();
  }
}

/** The sessions waiting for a worker offering their agent (agent-waits.ts). */
async function agentWaitsAt(url: string, prefix: string): Promise<AgentWait[]> {
  const redis = createRedis(url, { role: 'doctor', maxRetriesPerRequest: 1, log: () => undefined });
  try {
    return await readAgentWaits(redis, createKeys(prefix));
  } finally {
    redis.disconnect();
  }
}

/** Looks at this host's configuration, its Redis, the fleet's workers and this host's agents. */
export async function diagnose(env: NodeJS.ProcessEnv = process.env): Promise<DoctorReport> {
  const report: DoctorReport = {
    configuration: { ok: true },
    redis: { url: null, reachable: false },
    workers: [],
    agentWaits: [],
    agents: [],
    workspaces: { enabled: false, git: { ok: false, reason: 'not looked at' } },
    policy: null,
    problems: [],
  };
  const problem = (what: string, fix: string) => report.problems.push({ what, fix });
  let config: Config;
  try {
    config = loadConfig();
  } catch (error) {
    report.configuration = { ok: false, error: (error as Error).message };
    problem(
      `configuration: ${(error as Error).message}`,
      'fix that setting (docs/reference/configuration.md lists each one)',
    );
    return report;
  }
  try {
    report.policy = deploymentPolicy(config);
  } catch (error) {
    problem(`deployment policy: ${(error as Error).message}`, 'fix the policy (sessiond policy show says the same)');
  }
  const settings = clientSettingsOf(config);
  let url: string | null = null;
  try {
    url = await resolveRedisUrl(settings);
  } catch (error) {
    problem(`Redis: ${(error as Error).message}`, 'set REDIS_URL to a Redis sessiond can reach');
  }
  if (url !== null) {
    report.redis.url = redactUrl(url);
    const facts = await redisFacts(url);
    if ('error' in facts) {
      problem(`cannot reach Redis at ${redactUrl(url)}: ${facts.error}`, REDIS_FIXES.join('; '));
    } else {
      report.redis = { url: redactUrl(url), reachable: true, version: facts.version, mode: facts.mode };
      const reader = createReader({ redis: url, prefix: settings.prefix });
      try {
        const now = Date.now();
        const beats = (await withTimeout(reader.deployment.workers(), REDIS_REACH_MS)) ?? [];
        report.workers = beats
          .map((w) => ({
            ...w,
            live: isLive(w, now, workerStaleMs(config.worker.heartbeat)),
            lastSeenMsAgo: Math.max(0, now - w.lastSeen),
          }))
          .sort((a, b) => a.lastSeenMsAgo - b.lastSeenMsAgo);
      } finally {
        await reader.close();
      }
      report.agentWaits = (await withTimeout(agentWaitsAt(url, settings.prefix), REDIS_REACH_MS)) ?? [];
    }
  }
  report.agents = await describeAgents(config, env);
  const workspaces = workspaceConfig(config);
  const git = await probeGit();
  report.workspaces =
    workspaces === null
      ? { enabled: false, git }
      : { enabled: true, root: workspaces.root, store: redactUrl(workspaces.store), git };
  if (workspaces !== null && !git.ok)
    problem(
      `workspaces are on and git cannot run on this host (${git.reason}): a worker here refuses to start`,
      `install git (apt-get install git), or turn workspaces off: ${WORKSPACES_OFF_HINT}`,
    );
  findFleetProblems(report, problem);
  return report;
}

/** What is wrong with the workers and the agents, given what was gathered. */
function findFleetProblems(report: DoctorReport, problem: (what: string, fix: string) => void): void {
  const live = report.workers.filter((w) => w.live);
  if (report.redis.reachable && live.length === 0) {
    problem(
      report.workers.length === 0
        ? `no worker has ever sent a heartbeat to this Redis (prefix as configured): sessions wait in queued`
        : `no live worker: the last heartbeat is ${Math.round(Math.min(...report.workers.map((w) => w.lastSeenMsAgo)) / 1000)} s old`,
      'start one: sessiond worker (the same REDIS_URL and SESSIOND_PREFIX as here)',
    );
  }
  for (const w of live) {
    if (w.sandbox?.refused === true) {
      problem(
        `worker ${w.id} on ${w.host}: its sandbox mode is refused (${w.sandbox.detail}): its attempts fail`,
        'install bubblewrap there (apt-get install bubblewrap), or set SESSIOND_SANDBOX=auto',
      );
    } else if (w.sandbox?.mode === 'none') {
      problem(
        `worker ${w.id} on ${w.host}: agents run without a sandbox (${w.sandbox.detail})`,
        'install bubblewrap there and allow unprivileged user namespaces (docs/sandbox.md)',
      );
    }
    if (w.containment?.mode === 'sweep') {
      problem(
        `worker ${w.id} on ${w.host}: no cgroup of its own (${w.containment.detail}): no memory or pids ceiling per attempt`,
        'run it with a delegated cgroup v2 subtree (docs/operations/deployment.md)',
      );
    }
  }
  const offered = new Set(live.flatMap((w) => w.agents ?? []));
  const knownOffers = live.length > 0 && live.every((w) => w.agents !== undefined);
  for (const agent of report.policy?.agents ?? []) {
    if (knownOffers && !offered.has(agent)) {
      problem(
        `callers may choose ${agent}, but no live worker offers it: its sessions wait for one`,
        `run a worker that has ${agent}, or take it out of policy.agents`,
      );
    }
  }
  for (const wait of report.agentWaits) {
    if (live.some((w) => offersAgent(w, wait.agent))) continue;
    const oldest = wait.oldest[0];
    problem(
      `${wait.sessions} session${wait.sessions === 1 ? '' : 's'} wait${wait.sessions === 1 ? 's' : ''} for a worker offering agent ${wait.agent}, and no live worker offers it${oldest === undefined ? '' : ` (the oldest, ${oldest.sessionId}, since ${new Date(oldest.since).toISOString()})`}`,
      `start a worker that has ${wait.agent} (the same REDIS_URL and SESSIOND_PREFIX): they run as soon as it starts; or cancel them (sessiond cancel ID)`,
    );
  }
  for (const row of report.agents) {
    if (!(report.policy?.agents ?? []).includes(row.name) || row.installed) continue;
    problem(
      `${row.name}: its CLI (${row.command}) is not installed on this host`,
      `install it, or set its command in SESSIOND_AGENT_OPTIONS (docs/reference/agents.md); a worker on this host cannot run ${row.name}`,
    );
  }
}

/** The report for a person: what is there, then what is wrong and how to fix it. */
export function describeReport(report: DoctorReport): string {
  const lines: string[] = [];
  if (!report.configuration.ok) lines.push(`configuration: INVALID (${report.configuration.error})`);
  else lines.push('configuration: ok');
  const r = report.redis;
  lines.push(
    r.url === null
      ? 'redis: none found'
      : r.reachable
        ? `redis: ${r.url}, Redis ${r.version ?? '?'} (${r.mode ?? '?'})`
        : `redis: ${r.url} does not answer`,
  );
  const live = report.workers.filter((w) => w.live);
  lines.push(
    `workers: ${live.length} live${report.workers.length > live.length ? `, ${report.workers.length - live.length} gone quiet` : ''}`,
  );
  for (const w of report.workers) {
    const parts = [
      `${w.host} pid ${w.pid}`,
      w.live
        ? `${w.active}${w.concurrency === undefined ? '' : `/${w.concurrency}`} active`
        : `last seen ${Math.round(w.lastSeenMsAgo / 1000)} s ago`,
      `sandbox ${w.sandbox?.mode ?? '?'}`,
      `containment ${w.containment?.mode ?? '?'}`,
      ...(w.partitions === undefined ? [] : [`partitions ${w.partitions.join(',')}`]),
      ...(w.agents === undefined ? [] : [`agents ${w.agents.join(', ')}`]),
    ];
    lines.push(`  ${w.live ? '●' : '○'} ${w.id}: ${parts.join('; ')}`);
  }
  for (const wait of report.agentWaits)
    lines.push(
      `waiting for a worker offering agent ${wait.agent}: ${wait.sessions} session${wait.sessions === 1 ? '' : 's'} (${wait.oldest.map((o) => o.sessionId).join(', ')}${wait.sessions > wait.oldest.length ? ', …' : ''})`,
    );
  lines.push('agents on this host:');
  for (const a of report.agents) {
    const state = a.installed ? (a.version ?? 'version unknown') : 'not installed';
    lines.push(`  ${a.name}: ${a.command} ${state}`);
  }
  const ws = report.workspaces;
  const git = ws.git.ok ? ws.git.version : `git cannot run: ${ws.git.reason}`;
  lines.push(
    ws.enabled ? `workspaces: on, root ${ws.root ?? '?'}, store ${ws.store ?? '?'}; ${git}` : `workspaces: off; ${git}`,
  );
  if (report.policy !== null) lines.push(`callers may choose: ${report.policy.agents.join(', ')}`);
  if (report.problems.length === 0) lines.push('', 'no problem found');
  else {
    lines.push('', `${report.problems.length} problem${report.problems.length === 1 ? '' : 's'}:`);
    for (const p of report.problems) lines.push(`  ✗ ${p.what}`, `    → ${p.fix}`);
  }
  return `${lines.join('\n')}\n`;
}
