import { isAbsolute, join, resolve } from 'node:path';
import { checkConfig } from '../workspace/layout.ts';
import { WorkspaceInputError, type WorkspaceConfig } from '../workspace/types.ts';
import { z } from 'zod';
import { pickEnv } from '../process/sealed-env.ts';
import { PolicySchema } from '../policy/schema.ts';
import {
  ATTEMPT_DEFAULTS,
  defaultStateDir,
  HTTP_DEFAULTS,
  LIFECYCLE_DEFAULTS,
  SCHEDULE_DEFAULTS,
  QUEUE_DEFAULTS,
  SHUTDOWN_GRACE_MS,
  SWEEP_INTERVAL_MS,
  WORKER_DEFAULTS,
  WORKSPACE_DEFAULTS,
  workspacePaths,
} from './defaults.ts';
import { ENV_MAP, PREFIX_PATTERN, rawConfig } from './raw.ts';
import { parseRedisTarget } from './redis-url.ts';
import { parseDuration } from './duration.ts';
import { CallerSchema, readTokensFile, SCOPES, TokenListSchema } from './tokens.ts';
import { ConfigError } from '../errors.ts';
import { LimitsSchema } from './limits.ts';
import { WebhookDeliverySchema, WebhookListSchema } from './webhooks.ts';

/**
 * sessiond's configuration: one schema, read from defaults ← file
 * (SESSIOND_CONFIG, JSON) ← environment ← flags, validated once at start.
 * Errors name the field (`worker.concurrency: …`) and where it came from.
 */
const duration = (min: number, max: number) =>
  z.preprocess(
    (value) => {
      if (typeof value !== 'string') return value;
      const parsed = parseDuration(value);
      return parsed.ok ? parsed.ms : value;
    },
    z
      .number({ error: 'must be a duration such as 500ms, 2s or 1m' })
      .int()
      .min(min, `must be at least ${min} ms`)
      .max(max, `must be at most ${max} ms`),
  );

const integer = (min: number, max: number) =>
  z.preprocess(
    (value) => (typeof value === 'string' && /^-?\d+$/.test(value.trim()) ? Number(value) : value),
    z
      .number()
      .int(`must be an integer from ${min} to ${max}`)
      .min(min, `must be an integer from ${min} to ${max}`)
      .max(max, `must be an integer from ${min} to ${max}`),
  );

const absolute = z
  .string()
  .min(1)
  .max(4096)
  .refine((p) => isAbsolute(p), 'must be an absolute path');

export const ConfigSchema = z.strictObject({
  /** Where Redis is: `redis://[user:pass@]host:port[/db]` or `rediss://`; a Redis Cluster: `redis+cluster://host:port[,host:port…]` (seed nodes) or `rediss+cluster://`. Unset: a local Redis. */
  redisUrl: z
    .string()
    .superRefine((url, ctx) => {
      const parsed = parseRedisTarget(url);
      if (!parsed.ok)
        ctx.addIssue({
          code: 'custom',
          message: `${parsed.message.replace(/^invalid Redis URL: /, '')} (redis://, rediss://, redis+cluster:// or rediss+cluster://)`,
        });
    })
    .optional(),
  /** The activation queue: how many partitions (BullMQ queues, each its own hash tag) and which of them this worker consumes. */
  queue: z
    .strictObject({
      partitions: integer(1, 1024).default(QUEUE_DEFAULTS.partitions),
      /** Partition numbers this worker takes jobs from (default: every partition). */
      consume: z.preprocess(commaList, z.array(integer(0, 1023)).min(1, 'must name at least one partition')).optional(),
    })
    .prefault({}),
  /** Fenced session writes wait for this many replicas to acknowledge them (Redis WAIT); 0: do not wait. */
  redis: z
    .strictObject({
      /** Replicas that must acknowledge each fenced session write (Redis WAIT); 0: do not wait. */
      waitReplicas: integer(0, 16).default(0),
      /** How long a fenced write waits for those replicas. */
      waitTimeout: duration(10, 60_000).default(1_000),
    })
    .prefault({}),
  /** The key prefix every key of this deployment shares (workers, servers and clients of one deployment use the same). */
  prefix: z.string().regex(PREFIX_PATTERN, 'must be 1-64 letters, digits or _.-').default('sessiond'),
  /** Local state: a redis-server sessiond started, pi's session files. */
  stateDir: z.string().min(1).default(defaultStateDir()),
  /** Where a session runs when its caller names no cwd and workspaces are off, and the default allowed root of `policy.workspaceRoots`. */
  workspace: z.string().min(1).default(process.cwd()),
  /** Per-session workspaces (docs/workspaces.md): each session without a caller-named cwd gets its own files, snapshotted. */
  workspaces: z
    .strictObject({
      /** On (the default): sessions without a caller-named cwd get a workspace; needs git (SESSIOND_WORKSPACES_ENABLED=false: off). */
      enabled: z
        .preprocess(booleanText, z.boolean({ error: 'must be true or false (1 or 0)' }))
        .default(WORKSPACE_DEFAULTS.enabled),
      /** The sessions' working copies on this host; default `<stateDir>/workspaces`. The same path on every host. */
      root: absolute.optional(),
      /** The snapshot store: a git URL or a local bare repository's path; default `<stateDir>/workspace-store.git` (one host: several share one). */
      store: z
        .string()
        .min(1)
        .max(4096)
        .refine((s) => !s.startsWith('-'), 'must not start with -')
        .optional(),
      /** Untracked files matching these patterns (gitignore syntax) are never snapshotted (env: comma-separated). */
      exclude: z
        .preprocess(commaList, z.array(z.string().min(1).max(256)).max(100))
        .default([...WORKSPACE_DEFAULTS.exclude]),
      /** Most bytes of one workspace a snapshot accepts (0: no limit). */
      maxBytes: integer(0, 1_099_511_627_776).default(WORKSPACE_DEFAULTS.maxBytes),
      /** Most snapshots kept per session (0: no limit). */
      maxSnapshots: integer(0, 10_000_000).default(WORKSPACE_DEFAULTS.maxSnapshots),
    })
    .prefault({}),
  /** What callers may choose (src/policy): agents, cwd roots, permission ceilings, limits. Env SESSIOND_POLICY, JSON. */
  policy: PolicySchema.prefault({}),
  /** Variables of the worker's environment passed to every agent by name (besides the base: PATH, HOME, LANG…). */
  agentEnv: z
    .array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name'))
    .max(200)
    .default([]),
  worker: z
    .strictObject({
      concurrency: integer(1, 256).default(WORKER_DEFAULTS.concurrency),
      leaseTtl: duration(1000, 600_000).default(WORKER_DEFAULTS.leaseTtlMs),
      stalledInterval: duration(500, 600_000).default(WORKER_DEFAULTS.stalledIntervalMs),
      holdBackoff: duration(0, 3_600_000).default(WORKER_DEFAULTS.holdBackoffMs),
      poll: duration(50, 60_000).default(WORKER_DEFAULTS.pollMs),
      heartbeat: duration(100, 60_000).default(WORKER_DEFAULTS.heartbeatMs),
      shutdownGrace: duration(0, 3_600_000).default(SHUTDOWN_GRACE_MS),
      /** pids.max of each attempt's cgroup (0: none), where the host can apply it. */
      attemptPidsMax: integer(0, 4_194_304).default(ATTEMPT_DEFAULTS.pidsMax),
      /** Memory ceiling of each attempt's cgroup in MiB (0: none), where the host can apply it. */
      attemptMemoryMaxMb: integer(0, 1_048_576).default(ATTEMPT_DEFAULTS.memoryMaxMb),
      /** The agents this worker runs (default: every built-in one and each `acp:` one in `agents`); sessions of others wait for a worker offering them. */
      agents: z
        .preprocess(
          commaList,
          z
            .array(z.string().regex(/^(acp:)?[a-z0-9][a-z0-9._-]{0,63}$/, 'must be agent names'))
            .min(1, 'must name at least one agent')
            .max(100),
        )
        .optional(),
    })
    .prefault({}),
  pi: z
    .strictObject({
      /** The pi executable (PATH, then `node_modules/.bin`). */
      command: z.string().min(1).default('pi'),
      /** The pi agent dir (models, auth) on the worker's host; default `$PI_CODING_AGENT_DIR` or `~/.pi/agent`. */
      agentDir: z.string().min(1).optional(),
      /** Where pi session files live on the worker's host; default `<stateDir>/pi-sessions`. */
      sessionDir: z.string().min(1).optional(),
      /** Extra pi argv (env: a JSON array). */
      extraArgs: z.array(z.string()).default([]),
      idleTimeout: duration(1000, 86_400_000).default(ATTEMPT_DEFAULTS.idleTimeoutMs),
    })
    .prefault({}),
  /**
   * Host options of each agent for the worker (command, env, extra argv, its dirs…), by agent name,
   * merged over the defaults (for pi: the `pi` section above). Env SESSIOND_AGENT_OPTIONS, JSON.
   */
  agents: z.record(z.string(), z.record(z.string(), z.unknown())).default({}),
  /** Fleet-wide limits by key (src/runtime/limits/): `[{"match":{"provider":"anthropic"},"maxConcurrent":20}]`. Env SESSIOND_LIMITS, JSON. */
  limits: z.preprocess(jsonText, LimitsSchema).default([]),
  /** Operator webhooks (src/runtime/webhooks/): `[{"url":"https://…","secret":"whsec_…","events":["turn.ended"]}]`. Env SESSIOND_WEBHOOKS, JSON. */
  webhooks: z.preprocess(jsonText, WebhookListSchema).default([]),
  /** How webhooks are delivered: retries, limits, the private addresses allowed. Env SESSIOND_WEBHOOK_DELIVERY, JSON. */
  webhookDelivery: z.preprocess(jsonText, WebhookDeliverySchema).prefault({}),
  /** Retention and quotas (src/runtime/lifecycle/limits.ts). Durations accept `d` (days); retention `0` keeps sessions forever. */
  lifecycle: z
    .strictObject({
      retention: duration(0, 315_360_000_000).default(LIFECYCLE_DEFAULTS.retentionMs),
      maxRetention: duration(0, 315_360_000_000).default(LIFECYCLE_DEFAULTS.maxRetentionMs),
      maxQueuedPrompts: integer(1, 1_000_000).default(LIFECYCLE_DEFAULTS.maxQueuedPrompts),
      maxLogMessages: integer(100, 100_000_000).default(LIFECYCLE_DEFAULTS.maxLogMessages),
      maxArchiveBytes: integer(1024, 4 * 1024 * 1024 * 1024).default(LIFECYCLE_DEFAULTS.maxArchiveBytes),
      maxArchiveLineBytes: integer(1024, 1024 * 1024 * 1024).default(LIFECYCLE_DEFAULTS.maxArchiveLineBytes),
      maxLogBytes: integer(4096, 1_099_511_627_776).default(LIFECYCLE_DEFAULTS.maxLogBytes),
      sweepInterval: duration(100, 3_600_000).default(SWEEP_INTERVAL_MS),
    })
    .prefault({}),
  /** Bounds on schedules (src/runtime/schedules/): how many the deployment and each caller hold, the shortest interval. */
  schedules: z
    .strictObject({
      max: integer(1, 1_000_000).default(SCHEDULE_DEFAULTS.maxSchedules),
      maxPerCaller: integer(1, 1_000_000).default(SCHEDULE_DEFAULTS.maxPerCaller),
      minInterval: duration(1000, 86_400_000).default(SCHEDULE_DEFAULTS.minIntervalMs),
    })
    .prefault({}),
  /**
   * The local caller: the CLI, the HTTP API with no token configured, and SESSIOND_API_TOKEN. Its
   * tenant (env SESSIOND_TENANT) and the highest priority it may ask for (SESSIOND_MAX_PRIORITY);
   * tokens of http.tokens name their own (docs/security.md).
   */
  caller: CallerSchema,
  http: z
    .strictObject({
      host: z.string().min(1).default(HTTP_DEFAULTS.host),
      port: integer(0, 65535).default(HTTP_DEFAULTS.port),
      token: z.string().min(16, 'must be at least 16 characters').optional(),
      bodyLimitBytes: integer(1024, 50_000_000).default(HTTP_DEFAULTS.bodyLimitBytes),
      // Auth, hosts and streams (README "Auth"): src/interfaces/http/auth/.
      tokenScope: z.enum(SCOPES, { error: `must be one of ${SCOPES.join(', ')}` }).default('admin'),
      tokens: z.preprocess(jsonText, TokenListSchema).default([]),
      tokensFile: z.string().min(1).optional(),
      secret: z.string().min(32, 'must be at least 32 characters').optional(),
      allowedHosts: z
        .preprocess(
          commaList,
          z.array(
            z
              .string()
              .regex(/^[A-Za-z0-9.:[\]-]{1,255}$/, 'must be a host name or address (no scheme, no path)')
              .transform((h) => h.toLowerCase()),
          ),
        )
        .default([]),
      allowedOrigins: z
        .preprocess(
          commaList,
          z.array(
            z
              .string()
              .regex(/^https?:\/\/[^/\s]+$/, 'must be an origin: scheme://host[:port], no path')
              .transform((o) => o.toLowerCase()),
          ),
        )
        .default([]),
      maxStreams: integer(1, 100_000).default(HTTP_DEFAULTS.maxStreams),
      streamIdleTimeout: duration(1000, 86_400_000).default(HTTP_DEFAULTS.streamIdleTimeoutMs),
      streamTicketTtl: duration(1000, 3_600_000).default(HTTP_DEFAULTS.streamTicketTtlMs),
      loginTtl: duration(60_000, 30 * 86_400_000).default(HTTP_DEFAULTS.loginTtlMs),
      tlsCert: z.string().min(1).optional(),
      tlsKey: z.string().min(1).optional(),
    })
    .prefault({}),
});

export type Config = z.output<typeof ConfigSchema>;

function commaList(value: unknown): unknown {
  return typeof value === 'string'
    ? value
        .split(',')
        .map((v) => v.trim())
        .filter((v) => v !== '')
    : value;
}

function booleanText(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  const v = value.trim().toLowerCase();
  if (v === '1' || v === 'true') return true;
  if (v === '0' || v === 'false' || v === '') return false;
  return value;
}

function jsonText(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  try {
    return JSON.parse(value) as unknown;
  } catch {
    // Not JSON: the value is the string as given (the schema then says what is wrong with it).
    return value;
  }
}

/** Defined with every other error of sessiond in src/errors.ts. */
export { ConfigError };

/**
 * Loads the configuration. `flags` are dotted paths (`worker.concurrency`) set
 * by the CLI. Throws ConfigError naming every bad field; never logs a value
 * (the Redis URL and the API token are secrets).
 */
export function loadConfig(flags: Record<string, unknown> = {}, env: NodeJS.ProcessEnv = process.env): Config {
  const raw = rawConfig(flags, env);
  const parsed = ConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const envName = (path: string) =>
      Object.entries(ENV_MAP).find(([, p]) => p === path || path.startsWith(`${p}.`))?.[0];
    throw new ConfigError(
      parsed.error.issues
        .map((issue) => {
          const path = issue.path.join('.');
          const from =
            envName(path) ??
            (path.startsWith('policy')
              ? 'SESSIOND_POLICY'
              : path.startsWith('agentEnv')
                ? 'SESSIOND_AGENT_ENV'
                : undefined);
          return `${path}: ${issue.message}${from === undefined ? '' : ` (env ${from})`}`;
        })
        .join('\n'),
    );
  }
  const config = parsed.data;
  if (config.http.tokensFile !== undefined) {
    const read = readTokensFile(config.http.tokensFile);
    if (!read.ok) throw new ConfigError(`http.tokensFile: ${read.message} (env SESSIOND_API_TOKENS_FILE)`);
    const merged = TokenListSchema.safeParse([...config.http.tokens, ...read.tokens]);
    if (!merged.success)
      throw new ConfigError(
        `http.tokensFile: ${merged.error.issues.map((i) => `[${i.path.join('.')}]: ${i.message}`).join('; ')}`,
      );
    config.http.tokens = merged.data;
  }
  const ws = workspaceConfig(config);
  if (ws !== null) checkWorkspaces(ws);
  if ((config.http.tlsCert === undefined) !== (config.http.tlsKey === undefined)) {
    throw new ConfigError(
      `http.${config.http.tlsCert === undefined ? 'tlsCert' : 'tlsKey'}: --tls-cert and --tls-key go together (env SESSIOND_TLS_CERT, SESSIOND_TLS_KEY)`,
    );
  }
  return config;
}

/**
 * The host options a worker passes to every attempt, by agent. An agent's env is what the operator
 * configured for it, over the variables named in `agentEnv` (taken from the worker's environment);
 * the provider adds the base (PATH, HOME…) and nothing else.
 */
export function agentHostOptions(
  config: Config,
  agentNames: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): Record<string, Record<string, unknown>> {
  const named = pickEnv(config.agentEnv, env);
  const out: Record<string, Record<string, unknown>> = { pi: piHostOptions(config) };
  for (const [agent, options] of Object.entries(config.agents)) out[agent] = { ...(out[agent] ?? {}), ...options };
  for (const agent of new Set([...agentNames, ...Object.keys(out)])) {
    const options = out[agent] ?? {};
    const own = options.env !== null && typeof options.env === 'object' ? (options.env as Record<string, string>) : {};
    out[agent] = { ...options, env: { ...named, SESSIOND_STATE_DIR: config.stateDir, ...own } };
  }
  return out;
}

/** The pi options a worker of this host passes to every attempt. */
export function piHostOptions(config: Config): Record<string, unknown> {
  return {
    command: config.pi.command,
    ...(config.pi.agentDir === undefined ? {} : { agentDir: config.pi.agentDir }),
    sessionDir: config.pi.sessionDir ?? join(config.stateDir, 'pi-sessions'),
    extraArgs: config.pi.extraArgs,
    idleTimeoutMs: config.pi.idleTimeout,
    env: { SESSIOND_STATE_DIR: config.stateDir },
  };
}

/** The ceilings of each attempt's cgroup that this configuration asks for. */
export function attemptLimits(config: Config): { pidsMax: number; memoryMaxBytes: number } {
  return { pidsMax: config.worker.attemptPidsMax, memoryMaxBytes: config.worker.attemptMemoryMaxMb * 1024 * 1024 };
}

/**
 * The workspace module's own check (src/workspace/layout.ts: the root apart from sessiond's git data
 * and a local store, the store's form, the quotas), said as a configuration error naming the setting;
 * sessiond's git data sits under the state dir, so a clash with it is the root's.
 */
function checkWorkspaces(ws: WorkspaceConfig): void {
  try {
    checkConfig(ws);
  } catch (error) {
    if (!(error instanceof WorkspaceInputError)) throw error;
    const [field, problem] =
      error.field === 'gitDir'
        ? ['root', `must not hold or lie inside sessiond's own git data (${ws.gitDir}, under the state dir)`]
        : [error.field, error.problem];
    const env = { root: 'SESSIOND_WORKSPACES', store: 'SESSIOND_WORKSPACE_STORE' }[field as 'root' | 'store'];
    throw new ConfigError(`workspaces.${field}: ${problem}${env === undefined ? '' : ` (env ${env})`}`);
  }
}

/**
 * The workspaces of this configuration (null: off). sessiond's own git data lives under the state
 * dir, outside the workspaces root: an agent's sandbox binds only its own workspace.
 */
export function workspaceConfig(config: Config): WorkspaceConfig | null {
  const w = config.workspaces;
  if (!w.enabled) return null;
  const paths = workspacePaths(config.stateDir);
  return {
    root: w.root === undefined ? paths.root : resolve(w.root),
    gitDir: paths.gitDir,
    store: w.store ?? paths.store,
    exclude: w.exclude,
    maxBytes: w.maxBytes,
    maxSnapshots: w.maxSnapshots,
  };
}
