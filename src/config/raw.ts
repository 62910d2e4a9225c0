import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { ConfigError } from '../errors.ts';

/**
 * The configuration as given, before the schema (config.ts) checks it: the file (SESSIOND_CONFIG,
 * JSON) ← the environment ← flags, merged into one object of config paths. No zod here: the CLI's
 * client commands read this first (see client-settings.ts) and load the schema only when needed.
 */

/** A key prefix: 1-64 letters, digits or _.- (the schema's rule for `prefix`). */
export const PREFIX_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;

/** Environment variables → config paths. Values are strings; the schema converts them. */
export const ENV_MAP: Record<string, string> = {
  REDIS_URL: 'redisUrl',
  SESSIOND_QUEUE_PARTITIONS: 'queue.partitions',
  SESSIOND_QUEUE_PARTITIONS_CONSUMED: 'queue.consume',
  SESSIOND_REDIS_WAIT_REPLICAS: 'redis.waitReplicas',
  SESSIOND_REDIS_WAIT_TIMEOUT: 'redis.waitTimeout',
  SESSIOND_PREFIX: 'prefix',
  SESSIOND_STATE_DIR: 'stateDir',
  SESSIOND_CONCURRENCY: 'worker.concurrency',
  SESSIOND_WORKER_AGENTS: 'worker.agents',
  SESSIOND_LEASE_TTL: 'worker.leaseTtl',
  SESSIOND_STALLED_INTERVAL: 'worker.stalledInterval',
  SESSIOND_HOLD_BACKOFF: 'worker.holdBackoff',
  SESSIOND_POLL: 'worker.poll',
  SESSIOND_HEARTBEAT: 'worker.heartbeat',
  SESSIOND_SHUTDOWN_GRACE: 'worker.shutdownGrace',
  SESSIOND_ATTEMPT_PIDS_MAX: 'worker.attemptPidsMax',
  SESSIOND_ATTEMPT_MEMORY_MAX_MB: 'worker.attemptMemoryMaxMb',
  SESSIOND_WORKSPACE: 'workspace',
  SESSIOND_WORKSPACES_ENABLED: 'workspaces.enabled',
  SESSIOND_WORKSPACES: 'workspaces.root',
  SESSIOND_WORKSPACE_STORE: 'workspaces.store',
  SESSIOND_WORKSPACE_EXCLUDE: 'workspaces.exclude',
  SESSIOND_WORKSPACE_MAX_BYTES: 'workspaces.maxBytes',
  SESSIOND_WORKSPACE_MAX_SNAPSHOTS: 'workspaces.maxSnapshots',
  SESSIOND_PI_COMMAND: 'pi.command',
  SESSIOND_PI_AGENT_DIR: 'pi.agentDir',
  SESSIOND_PI_SESSION_DIR: 'pi.sessionDir',
  SESSIOND_PI_IDLE_TIMEOUT: 'pi.idleTimeout',
  SESSIOND_RETENTION: 'lifecycle.retention',
  SESSIOND_MAX_RETENTION: 'lifecycle.maxRetention',
  SESSIOND_MAX_QUEUED_PROMPTS: 'lifecycle.maxQueuedPrompts',
  SESSIOND_MAX_LOG_MESSAGES: 'lifecycle.maxLogMessages',
  SESSIOND_MAX_ARCHIVE_BYTES: 'lifecycle.maxArchiveBytes',
  SESSIOND_MAX_ARCHIVE_LINE_BYTES: 'lifecycle.maxArchiveLineBytes',
  SESSIOND_MAX_LOG_BYTES: 'lifecycle.maxLogBytes',
  SESSIOND_SWEEP_INTERVAL: 'lifecycle.sweepInterval',
  SESSIOND_MAX_SCHEDULES: 'schedules.max',
  SESSIOND_MAX_SCHEDULES_PER_CALLER: 'schedules.maxPerCaller',
  SESSIOND_SCHEDULE_MIN_INTERVAL: 'schedules.minInterval',
  SESSIOND_HTTP_HOST: 'http.host',
  SESSIOND_HTTP_PORT: 'http.port',
  SESSIOND_API_TOKEN: 'http.token',
  SESSIOND_API_TOKEN_SCOPE: 'http.tokenScope',
  SESSIOND_API_TOKENS: 'http.tokens',
  SESSIOND_API_TOKENS_FILE: 'http.tokensFile',
  SESSIOND_HTTP_SECRET: 'http.secret',
  SESSIOND_ALLOWED_HOSTS: 'http.allowedHosts',
  SESSIOND_ALLOWED_ORIGINS: 'http.allowedOrigins',
  SESSIOND_MAX_STREAMS: 'http.maxStreams',
  SESSIOND_STREAM_IDLE_TIMEOUT: 'http.streamIdleTimeout',
  SESSIOND_STREAM_TICKET_TTL: 'http.streamTicketTtl',
  SESSIOND_LOGIN_TTL: 'http.loginTtl',
  SESSIOND_TLS_CERT: 'http.tlsCert',
  SESSIOND_TLS_KEY: 'http.tlsKey',
  SESSIOND_LIMITS: 'limits',
  SESSIOND_WEBHOOKS: 'webhooks',
  SESSIOND_WEBHOOK_DELIVERY: 'webhookDelivery',
  SESSIOND_TENANT: 'caller.tenant',
  SESSIOND_MAX_PRIORITY: 'caller.maxPriority',
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
 * The configuration's raw input. `flags` are dotted paths (`worker.concurrency`) set by the CLI.
 * Throws ConfigError for an unreadable file or a JSON variable that does not parse.
 */
export function rawConfig(
  flags: Record<string, unknown> = {},
  env: NodeJS.ProcessEnv = process.env,
): Record<string, unknown> {
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
      throw new ConfigError(
        'SESSIOND_AGENT_OPTIONS: must be a JSON object by agent name, e.g. {"claude-code":{"command":"/usr/local/bin/claude"}}',
      );
    }
  }
  if (env.SESSIOND_POLICY !== undefined && env.SESSIOND_POLICY !== '') {
    try {
      setPath(raw, 'policy', JSON.parse(env.SESSIOND_POLICY) as unknown);
    } catch {
      throw new ConfigError(
        'SESSIOND_POLICY: must be a JSON object, e.g. {"agents":["pi"],"workspaceRoots":["/srv/work"]}',
      );
    }
  }
  if (env.SESSIOND_AGENT_ENV !== undefined && env.SESSIOND_AGENT_ENV !== '')
    setPath(
      raw,
      'agentEnv',
      env.SESSIOND_AGENT_ENV.split(',')
        .map((name) => name.trim())
        .filter((name) => name !== ''),
    );
  for (const [path, value] of Object.entries(flags)) if (value !== undefined) setPath(raw, path, value);
  return raw;
}
