import { isIP } from 'node:net';

/**
 * A host the deployment policy lets an attempt reach (`policy.network.allow`):
 * `registry.npmjs.org`, `*.pypi.org` (any subdomain, not the domain itself), `10.0.0.5:8080`,
 * `[::1]:8443`. Without a port: 443 and 80 only.
 */
export interface HostPattern {
  /** Lower-case host, without brackets for IPv6; `*.` kept at the front for a wildcard. */
  host: string;
  /** null: 443 and 80. */
  port: number | null;
}

/** Ports a pattern without a port allows. */
export const DEFAULT_PORTS: readonly number[] = [443, 80];

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/** Parses one pattern; returns an error message (without the field name) for a malformed one. Pure. */
export function parseHostPattern(raw: string): { ok: true; pattern: HostPattern } | { ok: false; error: string } {
  const text = raw.trim().toLowerCase();
  if (text === '') return { ok: false, error: 'must not be empty' };
  if (/[/@?#\s]/.test(text)) return { ok: false, error: `"${raw}" must be a host with an optional :port, not a URL` };
  let host = text;
  let portText: string | undefined;
  if (text.startsWith('[')) {
    const end = text.indexOf(']');
    if (end < 0) return { ok: false, error: `"${raw}": unclosed [` };
    host = text.slice(1, end);
    const rest = text.slice(end + 1);
    if (rest !== '' && !rest.startsWith(':')) return { ok: false, error: `"${raw}": expected :port after ]` };
    if (rest !== '') portText = rest.slice(1);
    if (isIP(host) !== 6) return { ok: false, error: `"${raw}": not an IPv6 address in brackets` };
  } else {
    const colon = text.lastIndexOf(':');
    if (colon >= 0) {
      if (text.indexOf(':') !== colon)
        return { ok: false, error: `"${raw}": an IPv6 address goes in brackets ([::1]:443)` };
      host = text.slice(0, colon);
      portText = text.slice(colon + 1);
    }
    if (isIP(host) === 0) {
      const labels = (host.startsWith('*.') ? host.slice(2) : host).split('.');
      if (host.length > 253 || labels.some((l) => !LABEL.test(l)))
        return { ok: false, error: `"${raw}": not a host name (letters, digits, dashes; "*." only at the front)` };
      if (host.startsWith('*.') && labels.length < 2)
        return { ok: false, error: `"${raw}": a wildcard needs a domain of at least two labels (*.example.com)` };
    }
  }
  let port: number | null = null;
  if (portText !== undefined) {
    if (!/^\d{1,5}$/.test(portText) || Number(portText) < 1 || Number(portText) > 65535)
      return { ok: false, error: `"${raw}": port must be 1-65535` };
    port = Number(portText);
  }
  return { ok: true, pattern: { host, port } };
}

/** The host as a pattern would name it: lower case, no brackets, no trailing dot. */
export function normalHost(host: string): string {
  const h = host.toLowerCase().replace(/\.$/, '');
  return h.startsWith('[') && h.endsWith(']') ? h.slice(1, -1) : h;
}

/** The host (lower case, no brackets) and port (the scheme's default when none) an http(s) URL leads to. Pure. */
export function urlHostPort(url: URL): { host: string; port: number } {
  const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
  return { host: url.hostname.replace(/^\[|\]$/g, '').toLowerCase(), port };
}

/** Does `pattern` allow `host:port`? Pure. */
export function matchesHost(pattern: HostPattern, host: string, port: number): boolean {
  const h = normalHost(host);
  if (pattern.port === null ? !DEFAULT_PORTS.includes(port) : pattern.port !== port) return false;
  if (pattern.host.startsWith('*.')) return h.endsWith(pattern.host.slice(1)) && h.length > pattern.host.length - 1;
  return h === pattern.host;
}

export function formatHostPattern(pattern: HostPattern): string {
  const host = isIP(pattern.host) === 6 ? `[${pattern.host}]` : pattern.host;
  return pattern.port === null ? host : `${host}:${pattern.port}`;
}
