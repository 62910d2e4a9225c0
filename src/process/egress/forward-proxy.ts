import {
  request as httpRequest,
  createServer,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type Server,
  type ServerResponse,
} from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { resolveDestination } from './destination.ts';
import type { HostPattern } from './host-pattern.ts';
import { listenUnix, type UnixListener } from './unix-listener.ts';

/** A request the proxy refused: what an audit line and the refusal counter carry. */
export interface EgressRefusal {
  host: string;
  port: number;
  /** `CONNECT` for a tunnel (https), else the HTTP method of an absolute-URI request. */
  method: string;
  reason: 'not allowed' | 'local address' | 'unresolved' | 'bad request';
}

export interface ForwardProxyOptions {
  /** The Unix socket to listen on (created; removed again by close()). */
  socketPath: string;
  /** What may be reached; everything else is refused. Read once: nothing can widen it later. */
  allow: readonly HostPattern[];
  /** Told of each refusal (audit, counter). Must not throw. */
  onRefused: (refusal: EgressRefusal) => void;
  /** Open client connections at most (more wait in the listen backlog's place: refused by the kernel). Default 64. */
  maxConnections?: number;
  /** A tunnel or request with no traffic this long is closed. Default 5 min. */
  idleMs?: number;
}

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authorization',
  'proxy-authenticate',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/**
 * The attempt's way out: an HTTP proxy on a Unix socket (CONNECT for https, absolute-URI requests
 * for http) that lets through only what `allow` names, and refuses (403) and reports the rest.
 * Contract: close() ends every connection and removes the socket file; nothing is left running.
 */
export async function startForwardProxy(options: ForwardProxyOptions): Promise<UnixListener> {
  const allow = options.allow.map((p) => ({ ...p }));
  const idleMs = options.idleMs ?? 300_000;
  const server: Server = createServer({ requestTimeout: 0 }, (req, res) => void forward(req, res));
  server.maxConnections = options.maxConnections ?? 64;
  server.on(
    'connect',
    (req: IncomingMessage, client: Duplex, head: Buffer) => void tunnel(req, client as Socket, head),
  );
  server.on('clientError', (_error, socket) => socket.destroy());

  function refuse(refusal: EgressRefusal): void {
    try {
      options.onRefused(refusal);
    } catch {
      // an audit sink that throws must not take the proxy down
    }
  }

  async function tunnel(req: IncomingMessage, client: Socket, head: Buffer): Promise<void> {
    client.on('error', () => client.destroy());
    client.setTimeout(idleMs, () => client.destroy());
    const target = parseAuthority(req.url ?? '');
    if (target === null) {
      refuse({ host: String(req.url ?? '').slice(0, 255), port: 0, method: 'CONNECT', reason: 'bad request' });
      client.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
      return;
    }
    const where = await resolveDestination(allow, target.host, target.port);
    if (!where.ok) {
      refuse({ ...target, method: 'CONNECT', reason: where.reason });
      client.end(
        `HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Type: text/plain\r\n\r\nsessiond egress: ${target.host}:${target.port} ${where.reason}\n`,
      );
      return;
    }
    const upstream = connect({ host: where.address, port: target.port, family: where.family });
    upstream.setTimeout(idleMs, () => upstream.destroy());
    upstream.once('connect', () => {
      if (client.destroyed) return void upstream.destroy();
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.on('error', () => {
      if (!client.destroyed && client.bytesWritten === 0)
        client.end('HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n');
      else client.destroy();
    });
    upstream.on('close', () => client.destroy());
    client.on('close', () => upstream.destroy());
  }

  async function forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let url: URL | null = null;
    try {
      url = new URL(req.url ?? '');
    } catch {
      // Refused just below as a bad request, and reported.
      url = null;
    }
    if (url === null || url.protocol !== 'http:') {
      refuse({ host: url?.hostname ?? '', port: 0, method: req.method ?? '', reason: 'bad request' });
      res
        .writeHead(400, { 'content-type': 'text/plain', connection: 'close' })
        .end('sessiond egress: send an absolute http:// URL, or CONNECT for https\n');
      return;
    }
    const host = url.hostname;
    const port = url.port === '' ? 80 : Number(url.port);
    const where = await resolveDestination(allow, host, port);
    if (!where.ok) {
      refuse({ host, port, method: req.method ?? '', reason: where.reason });
      res
        .writeHead(403, { 'content-type': 'text/plain', connection: 'close' })
        .end(`sessiond egress: ${host}:${port} ${where.reason}\n`);
      return;
    }
    const headers: OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(req.headers))
      if (!HOP_BY_HOP.has(name) && value !== undefined) headers[name] = value;
    headers.host = url.host;
    const out = httpRequest(
      {
        host: where.address,
        family: where.family,
        port,
        method: req.method,
        path: `${url.pathname}${url.search}`,
        headers,
        agent: false,
        timeout: idleMs,
      },
      (upstream) => {
        res.writeHead(upstream.statusCode ?? 502, upstream.headers);
        upstream.pipe(res);
      },
    );
    out.on('timeout', () => out.destroy());
    out.on('error', () => {
      if (!res.headersSent) res.writeHead(502, { connection: 'close' }).end();
      else res.destroy();
    });
    res.on('close', () => out.destroy());
    req.pipe(out);
  }

  return listenUnix(server, options.socketPath);
}

/** `host:port` of a CONNECT request (`[v6]:port` too); null when malformed. */
export function parseAuthority(authority: string): { host: string; port: number } | null {
  const match = /^(\[[0-9a-fA-F:.]+\]|[^:[\]/\s]+):(\d{1,5})$/.exec(authority);
  if (match?.[1] === undefined || match[2] === undefined) return null;
  const port = Number(match[2]);
  if (port < 1 || port > 65535) return null;
  return { host: match[1].replace(/^\[|\]$/g, '').toLowerCase(), port };
}
