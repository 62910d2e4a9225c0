import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startForwardProxy, type EgressRefusal } from './forward-proxy.ts';
import { urlHostPort, type HostPattern } from './host-pattern.ts';
import type { Bridge } from '../sandbox/types.ts';
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

/** The names of an attempt's egress bridges (SpawnSpec.bridges / finalize). */
export const PROXY_BRIDGE = 'egress-proxy';
export const MODEL_BRIDGE = 'egress-model';

/** What the agent is configured with once its bridges' URLs are known. */
export interface ReachedEgress {
  /** HTTP(S)_PROXY to the proxy, NO_PROXY for the model bridge: set last in the agent's environment. */
  env: Record<string, string>;
  /** The base URL the agent is given for its model (null: no model route, nothing brokered). */
  modelBaseUrl: string | null;
}

export interface AttemptEgress {
  /** The Unix sockets, as bridges for the spawn (the sandbox makes each reachable from inside). */
  readonly bridges: ReadonlyArray<Bridge>;
  /** The key the agent is given instead of the real one. */
  readonly placeholderKey: string;
  /** The agent's proxy variables and model base URL, from the bridges' URLs (SpawnSpec.finalize's argument). Throws when a bridge is missing. */
  reached(urls: Readonly<Record<string, string>>): ReachedEgress;
  /** Stops the proxy and the bridge, ends their connections, removes their sockets. Idempotent; never throws. */
  close(): Promise<void>;
}

/**
 * Opens an attempt's egress: a forward proxy allowing `context.allow` and the model host, and
 * (with a route) the model bridge that carries the real key to the model host. Throws when a
 * listener cannot start (the caller ends the attempt as a startup failure); nothing is left open then.
 */
export async function openAttemptEgress(context: EgressContext, route: ModelRoute | null): Promise<AttemptEgress> {
  const dir = await mkdtemp(join(tmpdir(), 'sessiond-egress-'));
  const opened: UnixListener[] = [];
  const closeAll = async (): Promise<void> => {
    // Best effort at teardown: a listener already closed, a socket dir already gone. Side by side: the
    // teardown is on the path of every attempt's end (a cancel's final state waits for it).
    await Promise.all(opened.map((item) => item.close().catch(() => undefined)));
    // A dir left in tmpdir holds only dead socket files.
    await rm(dir, { recursive: true, force: true }).catch(() => undefined);
  };
  try {
    const allow = route === null ? [...context.allow] : [...context.allow, urlHostPort(route.baseUrl)];
    const proxy = await startForwardProxy({
      socketPath: join(dir, 'proxy.sock'),
      allow,
      onRefused: (refusal) =>
        context.onRefused?.({
          ...refusal,
          sessionId: context.sessionId,
          turn: context.turn ?? null,
          attempt: context.attempt ?? null,
        }),
    });
    opened.push(proxy);
    const bridges: Bridge[] = [{ name: PROXY_BRIDGE, socket: proxy.socketPath }];
    if (route !== null) {
      const model = await startModelBridge({
        socketPath: join(dir, 'model.sock'),
        upstream: new URL(route.baseUrl.origin),
        key: route.key,
      });
      opened.push(model);
      bridges.push({ name: MODEL_BRIDGE, socket: model.socketPath });
    }
    let closing: Promise<void> | null = null;
    return {
      bridges,
      placeholderKey: PLACEHOLDER_KEY,
      reached: (urls) => {
        const proxyUrl = urls[PROXY_BRIDGE];
        if (proxyUrl === undefined) throw new Error(`the sandbox gave no URL for bridge ${PROXY_BRIDGE}`);
        const modelUrl = route === null ? undefined : urls[MODEL_BRIDGE];
        if (route !== null && modelUrl === undefined)
          throw new Error(`the sandbox gave no URL for bridge ${MODEL_BRIDGE}`);
        const modelBaseUrl =
          route === null || modelUrl === undefined
            ? null
            : `${modelUrl}${route.baseUrl.pathname.replace(/\/$/, '')}${route.baseUrl.search}`;
        return { env: proxyEnv(proxyUrl), modelBaseUrl };
      },
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
