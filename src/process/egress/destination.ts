import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { matchesHost, normalHost, type HostPattern } from './host-pattern.ts';

/**
 * Addresses a host *name* may not lead to, even when the name is allowed: the worker's own
 * loopback (Redis, sessiond's API), unspecified and link-local ones (cloud metadata at
 * 169.254.169.254). An operator who means one lists it by address (`127.0.0.1:8080`).
 */
const LOCAL = new BlockList();
LOCAL.addSubnet('127.0.0.0', 8, 'ipv4');
LOCAL.addSubnet('0.0.0.0', 8, 'ipv4');
LOCAL.addSubnet('169.254.0.0', 16, 'ipv4');
LOCAL.addAddress('::1', 'ipv6');
LOCAL.addAddress('::', 'ipv6');
LOCAL.addSubnet('fe80::', 10, 'ipv6');
LOCAL.addSubnet('::ffff:127.0.0.0', 104, 'ipv6');
LOCAL.addSubnet('::ffff:169.254.0.0', 112, 'ipv6');

export type Destination =
  { ok: true; address: string; family: 4 | 6 } | { ok: false; reason: 'not allowed' | 'local address' | 'unresolved' };

/**
 * Where a request for `host:port` may go: refused unless a pattern allows it; a name is resolved
 * once here (the connection goes to that address, so a second lookup cannot change it) and refused
 * when it leads to a local address.
 * Contract: never throws.
 */
export async function resolveDestination(
  allow: readonly HostPattern[],
  host: string,
  port: number,
): Promise<Destination> {
  const h = normalHost(host);
  if (!allow.some((p) => matchesHost(p, h, port))) return { ok: false, reason: 'not allowed' };
  const family = isIP(h);
  if (family !== 0) return { ok: true, address: h, family: family as 4 | 6 };
  try {
    const found = await lookup(h);
    const type = found.family === 6 ? 'ipv6' : 'ipv4';
    if (LOCAL.check(found.address, type)) return { ok: false, reason: 'local address' };
    return { ok: true, address: found.address, family: found.family === 6 ? 6 : 4 };
  } catch {
    // Refused with reason 'unresolved', which the proxy reports (an audit line, a 403 to the agent).
    return { ok: false, reason: 'unresolved' };
  }
}
