import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startForwardProxy, type EgressRefusal } from './forward-proxy.ts';
import type { HostPattern } from './host-pattern.ts';
import { loopbackBridge } from './loopback.ts';
import { PLACEHOLDER_KEY, startModelBridge } from './model-bridge.ts';
import type { UnixListener } from './unix-listener.ts';

/**
 * What the runtime gives an attempt's provider about its network (RunContext.egress). The allow
 * list comes from the deployment policy alone (policy.network), never from the caller's options.
 */
export interface EgressContext {
  sessionId: string;
  turn?: number;
  attempt?: number;
  /** Hosts the policy lets this agent reach besides its model host. */
  allow: readonly HostPattern[];
  /** Told of each refused request (the runtime audits and counts it). */
  onRefused?: (refusal: AttemptRefusal) => void;
}

export interface AttemptRefusal extends EgressRefusal {
  sessionId: string;
  turn: number | null;
  attempt: number | null;
}

/** Where an agent's model requests go and with which key (its provider's, held by the worker). */
export interface ModelRoute {
  /** The base URL the agent would use without brokering (`https://api.openai.com/v1`). */
  baseUrl: URL;
  key: string;
}

/** The Unix sockets of an attempt's egress, and how the agent reaches them (loopback URLs). */
export interface Reach {
  proxy: string;
  model: string | null;
  close(): Promise<void>;
}

/** Makes sockets reachable for the agent: by default loopback ports on the worker (no sandbox); a sandbox maps them into its own network namespace. */
export type ReachSockets = (sockets: { proxy: string; model: string | null }) => Promise<Reach>;

export interface AttemptEgress {
  /** The Unix sockets (for a sandbox's bridges). */
  readonly sockets: { proxy: string; model: string | null };
  /** The environment the agent and its tools get: HTTP(S)_PROXY to the proxy, NO_PROXY for the model bridge. */
  readonly env: Record<string, string>;
  /** The base URL the agent is given for its model (null: no model route, nothing brokered). */
  readonly modelBaseUrl: string | null;
  /** The key the agent is given instead of the real one. */
  readonly placeholderKey: string;
  /** Stops the proxy and the bridge, ends their connections, removes their sockets. Idempotent; never throws. */
  close(): Promise<void>;
}

const defaultReach: ReachSockets = async (sockets) => {
  const proxy = await loopbackBridge(sockets.proxy);
  const model =
    sockets.model === null
      ? null
      : await loopbackBridge(sockets.model).catch(async (error: unknown) => {
          await proxy.close();
          throw error;
        });
  return { proxy: proxy.url, model: model?.url ?? null, close: async () => void (await Promise.all([proxy.close(), model?.close()])) };
};

/** The model host as a proxy pattern: the agent may reach it through the proxy too (without the key). */
function modelPattern(url: URL): HostPattern {
  const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
  return { host: url.hostname.replace(/^\[|\]$/g, '').toLowerCase(), port };
}

/**
 * Opens an attempt's egress: a forward proxy allowing `context.allow` and the model host, and
 * (with a route) the model bridge that carries the real key to the model host. Throws when a
 * listener cannot start (the caller ends the attempt as a startup failure); nothing is left open then.
 */
export async function openAttemptEgress(context: EgressContext, route: ModelRoute | null, reach: ReachSockets = defaultReach): Promise<AttemptEgress> {
  const dir = await mkdtemp(join(tmpdir(), 'sessiond-egress-'));
  const opened: Array<UnixListener | Reach> = [];
  const closeAll = async (): Promise<void> => {
    for (const item of opened.reverse()) await item.close().catch(() => undefined);
    await rm(dir, { recursive: true, force: true }).catch(() => undefined);
  };
  try {
    const allow = route === null ? [...context.allow] : [...context.allow, modelPattern(route.baseUrl)];
    const proxy = await startForwardProxy({
      socketPath: join(dir, 'proxy.sock'),
      allow,
      onRefused: (refusal) => context.onRefused?.({ ...refusal, sessionId: context.sessionId, turn: context.turn ?? null, attempt: context.attempt ?? null }),
    });
    opened.push(proxy);
    let model: UnixListener | null = null;
    if (route !== null) {
      model = await startModelBridge({ socketPath: join(dir, 'model.sock'), upstream: new URL(route.baseUrl.origin), key: route.key });
      opened.push(model);
    }
    const sockets = { proxy: proxy.socketPath, model: model?.socketPath ?? null };
    const reached = await reach(sockets);
    opened.push(reached);
    const modelBaseUrl = reached.model === null || route === null ? null : `${reached.model}${route.baseUrl.pathname.replace(/\/$/, '')}${route.baseUrl.search}`;
    let closing: Promise<void> | null = null;
    return {
      sockets,
      env: proxyEnv(reached.proxy),
      modelBaseUrl,
      placeholderKey: PLACEHOLDER_KEY,
      close: () => (closing ??= closeAll()),
    };
  } catch (error) {
    await closeAll();
    throw error;
  }
}

/** The standard proxy variables (both cases: curl reads only the lower-case http_proxy). Loopback stays direct: the model bridge is there. */
export function proxyEnv(proxyUrl: string): Record<string, string> {
  const noProxy = '127.0.0.1,localhost,::1';
  return {
    HTTPS_PROXY: proxyUrl,
    https_proxy: proxyUrl,
    HTTP_PROXY: proxyUrl,
    http_proxy: proxyUrl,
    ALL_PROXY: proxyUrl,
    all_proxy: proxyUrl,
    NO_PROXY: noProxy,
    no_proxy: noProxy,
  };
}
