import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';

/** 127.0.0.0/8, ::1 and `localhost`: only this machine can connect. */
export function isLoopbackHost(host: string): boolean {
  const h = bare(host);
  if (h === 'localhost' || h === '::1' || h === '::ffff:127.0.0.1') return true;
  return isIP(h) === 4 && h.startsWith('127.');
}

function bare(host: string): string {
  return host
    .trim()
    .toLowerCase()
    .replace(/^\[|\]$/g, '');
}

/** `host:port` → `host`, `[::1]:80` → `::1`. */
export function hostName(hostHeader: string): string {
  const h = hostHeader.trim().toLowerCase();
  if (h.startsWith('[')) return h.slice(1, h.indexOf(']'));
  const colon = h.lastIndexOf(':');
  return colon > 0 && h.indexOf(':') === colon ? h.slice(0, colon) : h;
}

export interface HostPolicyOptions {
  /** The address the server is bound to. */
  bound: string;
  /** `http.allowedHosts`: more names this server answers to (a proxy that keeps Host: its public name). */
  allowedHosts: readonly string[];
  /** `http.allowedOrigins`: pages that may send mutations (a proxy that rewrites Host: its public origin). */
  allowedOrigins: readonly string[];
}

/**
 * Which `Host` a request may name (DNS rebinding: a page of another site whose
 * name now resolves to this server sends its own name) and which `Origin` may
 * send a mutation. By default: the bound address and `localhost` (loopback
 * addresses too; bound to a wildcard address, every address of this machine).
 */
export class HostPolicy {
  readonly #hosts: Set<string>;
  readonly #origins: Set<string>;

  constructor(options: HostPolicyOptions) {
    const hosts = new Set<string>([bare(options.bound), 'localhost', '127.0.0.1', '::1']);
    if (bare(options.bound) === '0.0.0.0' || bare(options.bound) === '::') {
      for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) hosts.add(bare(a.address));
    }
    for (const h of options.allowedHosts) hosts.add(hostName(h));
    this.#hosts = hosts;
    this.#origins = new Set(options.allowedOrigins.map((o) => o.toLowerCase().replace(/\/$/, '')));
  }

  /** A request without Host (HTTP/1.0) comes from no browser: allowed. */
  hostAllowed(hostHeader: string | undefined): boolean {
    return hostHeader === undefined || this.#hosts.has(hostName(hostHeader));
  }

  /**
   * A mutation's Origin: none (not a browser) or an allowed origin, or the
   * page's own origin (its host is the Host this request was sent to). `null`
   * (sandboxed frames, file://) never.
   */
  originAllowed(origin: string | undefined, hostHeader: string | undefined): boolean {
    if (origin === undefined) return true;
    const o = origin.trim().toLowerCase();
    if (o === 'null') return false;
    if (this.#origins.has(o)) return true;
    let host: string;
    try {
      host = new URL(o).host;
    } catch {
      // An Origin that is not a URL is refused, like any origin not allowed.
      return false;
    }
    return hostHeader !== undefined && host === hostHeader.trim().toLowerCase();
  }

  describe(): string {
    return [...this.#hosts].join(', ');
  }
}
