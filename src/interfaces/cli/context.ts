import type { Redis } from 'ioredis';
import type { Config } from '../../config/config.ts';
import { clientSettingsOf, plainClientSettings, type ClientSettings } from '../../config/client-settings.ts';
import { rawConfig } from '../../config/raw.ts';
import { resolveRedisUrl } from './resolve-redis.ts';
import type { DeploymentPolicy } from '../../policy/index.ts';
import { bindClient } from '../../api/bind.ts';
import type { Client } from '../../api/client.ts';
import { connections } from '../../api/connections.ts';
import { CliError } from './cli-error.ts';
import { reachRedis, trackingErrors, type ReachOptions } from './reach-redis.ts';
import { loadConfig, workspaceConfig } from '../../config/config.ts';
import { deploymentPolicy } from '../../runtime/deployment-policy.ts';

export { CliError } from './cli-error.ts';

/** What a client command (`inspect`, `list`, `enqueue`, …) works with: openClient. */
export interface ClientContext {
  /** What of the configuration a client needs (Redis, prefix, retention and quotas, fleet limits). */
  settings: ClientSettings;
  /** The deployment policy of this configuration, resolved on first use (a read-only command never resolves it). */
  policy(): Promise<DeploymentPolicy>;
  url: string;
  /** The public client (src/api): every command reaches sessions through it, as a library user does. */
  client: Client;
  connect: (role: string) => Redis;
  close(): Promise<void>;
}

/** What the server commands (`worker`, `serve`, `demo`) work with: openServerContext, the whole configuration checked. */
export interface ServerContext extends ClientContext {
  config: Config;
}

async function loadWhole(flags: Record<string, unknown>): Promise<Config> {
  try {
    return loadConfig(flags);
  } catch (error) {
    throw new CliError(`configuration: ${(error as Error).message}`);
  }
}

/**
 * A client command's context. A configuration of nothing but REDIS_URL, SESSIOND_PREFIX and
 * SESSIOND_STATE_DIR is read without its schema (config/client-settings.ts); any other setting is
 * read and checked whole first, as openServerContext does. The deployment policy is resolved on first
 * use (by a write).
 */
export async function openClient(flags: Record<string, unknown> = {}): Promise<ClientContext> {
  let raw: Record<string, unknown>;
  try {
    raw = rawConfig(flags);
  } catch (error) {
    throw new CliError(`configuration: ${(error as Error).message}`);
  }
  const plain = plainClientSettings(raw);
  if (plain !== null) return connectContext(plain, flags);
  const config = await loadWhole(flags);
  return connectContext(clientSettingsOf(config), flags, config);
}

/** The client settings of a configuration that is more than the plain settings, checked whole (reader-context.ts). */
export async function checkedClientSettings(flags: Record<string, unknown>): Promise<ClientSettings> {
  return clientSettingsOf(await loadWhole(flags));
}

/** A server command's context: the whole configuration, checked. */
export async function openServerContext(flags: Record<string, unknown> = {}): Promise<ServerContext> {
  const config = await loadWhole(flags);
  // A server keeps waiting for Redis (its connections retry), having said once what is wrong.
  const reach = { keepTrying: (help: string) => void process.stderr.write(`${help}\n`) };
  return { ...(await connectContext(clientSettingsOf(config), flags, config, reach)), config };
}

async function connectContext(
  settings: ClientSettings,
  flags: Record<string, unknown>,
  config?: Config,
  reach?: ReachOptions,
): Promise<ClientContext> {
  let resolved: Promise<DeploymentPolicy> | null = null;
  const policy = (): Promise<DeploymentPolicy> =>
    (resolved ??= (async () => {
      const whole = config ?? (await loadWhole(flags));
      return deploymentPolicy(whole);
    })().catch((error: Error) =>
      Promise.reject(error instanceof CliError ? error : new CliError(`configuration: ${error.message}`)),
    ));
  const workspaces = config === undefined ? null : workspaceConfig(config);
  const url = await resolveRedisUrl(settings);
  // Connections made here are closed with the context, as createClient's are with its client.
  const made = connections(url);
  const { closeAll } = made;
  const { connect, lastError } = trackingErrors(made.connect);
  const client = bindClient({
    connect,
    prefix: settings.prefix,
    policy,
    limits: settings.lifecycle,
    schedules: settings.schedules,
    queuePartitions: settings.queuePartitions,
    fleetLimits: settings.fleetLimits,
    // Export, import, fork and diff reach a session's workspace (a plain configuration has workspaces off).
    ...(workspaces === null ? {} : { workspaces }),
  });
  await reachRedis(() => client.deployment.ping(), url, lastError, closeAll, reach);
  return {
    settings,
    policy,
    url,
    client,
    connect,
    async close() {
      // Closing on the way out: the connections are dropped just below anyway.
      await client.close().catch(() => undefined);
      closeAll();
    },
  };
}
