import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

/**
 * Where a webhook may be sent: never to loopback, unspecified, link-local (cloud metadata), private
 * (RFC 1918, carrier-grade NAT, IPv6 unique-local) addresses unless the operator allows them
 * (`webhookDelivery.allowAddresses`). A name is resolved once here and the request goes to that
 * address, so a second lookup cannot lead elsewhere.
 */
const REFUSED = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.168.0.0', 16],
  ['224.0.0.0', 3],
] as const)
  REFUSED.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [
  ['::', 128],
  ['::1', 128],
  ['fe80::', 10],
  ['fc00::', 7],
  ['ff00::', 8],
] as const)
  REFUSED.addSubnet(net, bits, 'ipv6');

export function allowList(entries: readonly string[]): BlockList {
  const list = new BlockList();
  for (const entry of entries) {
    const [address = '', bits] = entry.split('/');
    const type = isIP(address) === 6 ? 'ipv6' : 'ipv4';
    if (bits === undefined) list.addAddress(address, type);
    else list.addSubnet(address, Number(bits), type);
  }
  return list;
}

export type WebhookDestination = { ok: true; address: string; family: 4 | 6 } | { ok: false; reason: string };

/** Contract: never throws. */
export async function webhookDestination(host: string, allowed: BlockList): Promise<WebhookDestination> {
  const h = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  let address = h;
  let family = isIP(h);
  if (family === 0) {
    try {
      const found = await lookup(h);
      address = found.address;
      family = found.family;
    } catch (error) {
      return { ok: false, reason: `cannot resolve ${h}: ${(error as Error).message}` };
    }
  }
  const type: 'ipv4' | 'ipv6' = family === 6 ? 'ipv6' : 'ipv4';
  // An IPv4-mapped IPv6 address is checked as the IPv4 address it is.
  const mapped = type === 'ipv6' && /^::ffff:\d+\.\d+\.\d+\.\d+$/i.test(address) ? address.slice(7) : null;
  const [a, t]: [string, 'ipv4' | 'ipv6'] = mapped === null ? [address, type] : [mapped, 'ipv4'];
  if (REFUSED.check(a, t) && !allowed.check(a, t))
    return {
      ok: false,
      reason: `${a} is a loopback, link-local or private address (not in webhookDelivery.allowAddresses)`,
    };
  return { ok: true, address, family: family === 6 ? 6 : 4 };
}
