import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { parseDuration } from './duration.ts';

/**
 * sessiond's configuration: one schema, read from defaults ← file
 * (SESSIOND_CONFIG, JSON) ← environment ← flags, validated once at start.
 * Errors name the field (`worker.concurrency: …`) and where it came from.
 */
const duration = (min: number, max: number) =>
  z.preprocess((value) => {
    if (typeof value !== 'string') return value;
    const parsed = parseDuration(value);
    return parsed.ok ? parsed.ms : value;
  }, z.number({ error: 'must be a duration such as 500ms, 2s or 1m' }).int().min(min, `must be at least ${min} ms`).max(max, `must be at most ${max} ms`));

const integer = (min: number, max: number) =>
  z.preprocess((value) => (typeof value === 'string' && /^-?\d+$/.test(value.trim()) ? Number(value) : value), z.number().int(`must be an integer from ${min} to ${max}`).min(min, `must be an integer from ${min} to ${max}`).max(max, `must be an integer from ${min} to ${max}`));

export const ConfigSchema = z.strictObject({
  redisUrl: z.string().regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL').optional(),
  prefix: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must be 1-64 letters, digits or _.-').default('sessiond'),
  stateDir: z.string().min(1).default(join(process.env.XDG_STATE_HOME || join(homedir(), '.local', 'state'), 'sessiond')),
  worker: z
    .strictObject({
      concurrency: integer(1, 256).default(4),
      leaseTtl: duration(1000, 600_000).default(30_000),
      stalledInterval: duration(500, 600_000).default(15_000),
      holdBackoff: duration(0, 3_600_000).default(2_000),
      poll: duration(50, 60_000).default(1_000),
      heartbeat: duration(100, 60_000).default(5_000),
      shutdownGrace: duration(0, 3_600_000).default(10_000),
    })
    .prefault({}),
  pi: z
    .strictObject({
      command: z.string().min(1).default('pi'),
      agentDir: z.string().min(1).optional(),
      sessionDir: z.string().min(1).optional(),
      extraArgs: z.array(z.string()).default([]),
      idleTimeout: duration(1000, 86_400_000).default(600_000),
    })
    .prefault({}),
  /**
   * Host options of each agent for the worker (command, env, extra argv, its dirs…), by agent name,
   * merged over the defaults (for pi: the `pi` section above). Env SESSIOND_AGENT_OPTIONS, JSON.
   */
  agents: z.record(z.string(), z.record(z.string(), z.unknown())).default({}),
  /** Retention and quotas (src/runtime/lifecycle/limits.ts). Durations accept `d` (days); retention `0` keeps sessions forever. */
  lifecycle: z
    .strictObject({
      retention: duration(0, 315_360_000_000).default(2_592_000_000),
      maxRetention: duration(0, 315_360_000_000).default(31_536_000_000),
      maxQueuedPrompts: integer(1, 1_000_000).default(100),
      maxLogMessages: integer(100, 100_000_000).default(100_000),
      sweepInterval: duration(100, 3_600_000).default(10_000),
    })
    .prefault({}),
  http: z
    .strictObject({
      host: z.string().min(1).default('127.0.0.1'),
      port: integer(0, 65535).default(7420),
      token: z.string().min(16, 'must be at least 16 characters').optional(),
      bodyLimitBytes: integer(1024, 50_000_000).default(1_000_000),
    })
    .prefault({}),
});

export type Config = z.output<typeof ConfigSchema>;

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/** Environment variables → config paths. Values are strings; the schema converts them. */
const ENV_MAP: Record<string, string> = {
  REDIS_URL: 'redisUrl',
  SESSIOND_PREFIX: 'prefix',
  SESSIOND_STATE_DIR: 'stateDir',
  SESSIOND_CONCURRENCY: 'worker.concurrency',
  SESSIOND_LEASE_TTL: 'worker.leaseTtl',
  SESSIOND_STALLED_INTERVAL: 'worker.stalledInterval',
  SESSIOND_HOLD_BACKOFF: 'worker.holdBackoff',
  SESSIOND_POLL: 'worker.poll',
  SESSIOND_HEARTBEAT: 'worker.heartbeat',
  SESSIOND_SHUTDOWN_GRACE: 'worker.shutdownGrace',
  SESSIOND_PI_COMMAND: 'pi.command',
  SESSIOND_PI_AGENT_DIR: 'pi.agentDir',
  SESSIOND_PI_SESSION_DIR: 'pi.sessionDir',
  SESSIOND_PI_IDLE_TIMEOUT: 'pi.idleTimeout',
  SESSIOND_RETENTION: 'lifecycle.retention',
  SESSIOND_MAX_RETENTION: 'lifecycle.maxRetention',
  SESSIOND_MAX_QUEUED_PROMPTS: 'lifecycle.maxQueuedPrompts',
  SESSIOND_MAX_LOG_MESSAGES: 'lifecycle.maxLogMessages',
  SESSIOND_SWEEP_INTERVAL: 'lifecycle.sweepInterval',
  SESSIOND_HTTP_HOST: 'http.host',
  SESSIOND_HTTP_PORT: 'http.port',
  SESSIOND_API_TOKEN: 'http.token',
};

function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const parts = path.split('.');
  let node = target;
  for (const part of parts.slice(0, -1)) {
    const next = node[part];
    node[part] = next !== null && typeof next === 'object' ? next : {};
    node = node[part] as Record<string, unknown>;
  }
  node[parts.at(-1) as string] = value;
}

/**
 * Loads the configuration. `flags` are dotted paths (`worker.concurrency`) set
 * by the CLI. Throws ConfigError naming every bad field; never logs a value
 * (the Redis URL and the API token are secrets).
 */
export function loadConfig(flags: Record<string, unknown> = {}, env: NodeJS.ProcessEnv = process.env): Config {
  const raw: Record<string, unknown> = {};
  const file = env.SESSIOND_CONFIG;
  if (file !== undefined && file !== '') {
    let text: string;
    try {
      text = readFileSync(resolve(file), 'utf8');
    } catch (error) {
      throw new ConfigError(`SESSIOND_CONFIG: cannot read ${file}: ${(error as Error).message}`);
    }
    try {
      Object.assign(raw, JSON.parse(text) as Record<string, unknown>);
    } catch {
      throw new ConfigError(`SESSIOND_CONFIG: ${file} is not valid JSON`);
    }
  }
  for (const [name, path] of Object.entries(ENV_MAP)) {
    const value = env[name];
    if (value !== undefined && value !== '') setPath(raw, path, value);
  }
  if (env.SESSIOND_PI_ARGS !== undefined && env.SESSIOND_PI_ARGS !== '') {
    try {
      setPath(raw, 'pi.extraArgs', JSON.parse(env.SESSIOND_PI_ARGS) as unknown);
    } catch {
      throw new ConfigError('SESSIOND_PI_ARGS: must be a JSON array of strings, e.g. ["--no-context-files"]');
    }
  }
  if (env.SESSIOND_AGENT_OPTIONS !== undefined && env.SESSIOND_AGENT_OPTIONS !== '') {
    try {
      setPath(raw, 'agents', JSON.parse(env.SESSIOND_AGENT_OPTIONS) as unknown);
    } catch {
      throw new ConfigError('SESSIOND_AGENT_OPTIONS: must be a JSON object by agent name, e.g. {"claude-code":{"command":"/usr/local/bin/claude"}}');
    }
  }
  for (const [path, value] of Object.entries(flags)) if (value !== undefined) setPath(raw, path, value);
  const parsed = ConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const envName = (path: string) => Object.entries(ENV_MAP).find(([, p]) => p === path)?.[0];
    throw new ConfigError(
      parsed.error.issues
        .map((issue) => {
          const path = issue.path.join('.');
          const from = envName(path);
          return `${path}: ${issue.message}${from === undefined ? '' : ` (env ${from})`}`;
        })
        .join('\n'),
    );
  }
  return parsed.data;
}

/** The deployment's retention and quotas, as the runtime takes them. */
export function lifecycleLimits(config: Config): { retentionMs: number; maxRetentionMs: number; maxQueuedPrompts: number; maxLogMessages: number } {
  const l = config.lifecycle;
  return { retentionMs: l.retention, maxRetentionMs: l.maxRetention, maxQueuedPrompts: l.maxQueuedPrompts, maxLogMessages: l.maxLogMessages };
}

/** The host options a worker passes to every attempt, by agent. */
export function agentHostOptions(config: Config): Record<string, Record<string, unknown>> {
  const out: Record<string, Record<string, unknown>> = { pi: piHostOptions(config) };
  for (const [agent, options] of Object.entries(config.agents)) out[agent] = { env: { SESSIOND_STATE_DIR: config.stateDir }, ...(out[agent] ?? {}), ...options };
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
