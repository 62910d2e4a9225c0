export { formatHostPattern, matchesHost, parseHostPattern, DEFAULT_PORTS, type HostPattern } from './host-pattern.ts';
export { startForwardProxy, parseAuthority, type EgressRefusal, type ForwardProxyOptions } from './forward-proxy.ts';
export { startModelBridge, PLACEHOLDER_KEY, swapKey, withKeyQuery, type ModelBridgeOptions } from './model-bridge.ts';
export {
  MODEL_BRIDGE,
  openAttemptEgress,
  PROXY_BRIDGE,
  proxyEnv,
  type AttemptEgress,
  type AttemptRefusal,
  type EgressContext,
  type ModelRoute,
  type ReachedEgress,
} from './attempt-egress.ts';
export type { UnixListener } from './unix-listener.ts';
