import {
  Agent as HttpAgent,
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import { urlHostPort } from './host-pattern.ts';
import { listenUnix, type UnixListener } from './unix-listener.ts';

/** The key an agent is given instead of its provider's: worthless anywhere but through its model bridge. */
export const PLACEHOLDER_KEY = 'sessiond-brokered-key';

/** Headers a model client puts its key in; the bridge swaps the placeholder for the real key in whichever it finds. */
const KEY_HEADERS = ['authorization', 'x-api-key', 'x-goog-api-key', 'api-key'] as const;

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

export interface ModelBridgeOptions {
  socketPath: string;
  /** The model host's origin (`https://api.anthropic.com`): every request goes there, and only there. */
  upstream: URL;
  /** The provider's real key: put on requests to `upstream`, never logged, never sent elsewhere. */
  key: string;
  maxConnections?: number;
  idleMs?: number;
}

/**
 * A reverse proxy from the attempt to its model host, on a Unix socket. The agent is configured
 * with a base URL leading here and PLACEHOLDER_KEY; each request is sent to `upstream` with the
 * same path, and the placeholder in its key header (`Authorization: Bearer …`, `x-api-key`,
 * `x-goog-api-key`, `api-key`, or a `key=` query parameter) replaced by the real key. A key
 * header holding anything else is dropped: the agent cannot make the bridge carry its own
 * credentials, and the real key never goes back to it.
 * Contract: close() ends every connection and removes the socket file.
 */
export async function startModelBridge(options: ModelBridgeOptions): Promise<UnixListener> {
  const { upstream, key } = options;
  const idleMs = options.idleMs ?? 600_000;
  const https = upstream.protocol === 'https:';
  const send = https ? httpsRequest : httpRequest;
  // Connections to the model host are kept and reused (one TLS handshake, not one per request); closed with the bridge.
  const agent = https
    ? new HttpsAgent({ keepAlive: true, maxSockets: 16 })
    : new HttpAgent({ keepAlive: true, maxSockets: 16 });
  const { host, port } = urlHostPort(upstream);
  const server = createServer({ requestTimeout: 0 }, (req: IncomingMessage, res: ServerResponse) => {
    const path = withKeyQuery(req.url ?? '/', key);
    if (path === null) {
      res.writeHead(400, { connection: 'close' }).end('sessiond model bridge: origin-form request paths only\n');
      return;
    }
    const headers: OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (HOP_BY_HOP.has(name) || value === undefined) continue;
      if ((KEY_HEADERS as readonly string[]).includes(name)) {
        const swapped = swapKey(String(value), key);
        if (swapped !== null) headers[name] = swapped;
        continue;
      }
      headers[name] = value;
    }
    headers.host = upstream.host;
    const out = send(
      {
        host,
        port,
        method: req.method,
        path,
        headers,
        agent,
        timeout: idleMs,
        ...(https && isIP(host) === 0 ? { servername: host } : {}),
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    out.on('timeout', () => out.destroy());
    out.on('error', () => {
      if (!res.headersSent)
        res.writeHead(502, { connection: 'close' }).end('sessiond model bridge: the model host did not answer\n');
      else res.destroy();
    });
    res.on('close', () => out.destroy());
    req.pipe(out);
  });
  server.maxConnections = options.maxConnections ?? 64;
  server.on('clientError', (_error, socket) => socket.destroy());
  const listener = await listenUnix(server, options.socketPath);
  return {
    socketPath: listener.socketPath,
    close: async () => {
      await listener.close();
      agent.destroy();
    },
  };
}

/** The header value with the placeholder replaced by `key` (`Bearer <placeholder>` → `Bearer <key>`); null when it holds no placeholder. */
export function swapKey(value: string, key: string): string | null {
  const trimmed = value.trim();
  if (trimmed === PLACEHOLDER_KEY) return key;
  const bearer = /^(bearer)\s+(.+)$/i.exec(trimmed);
  if (bearer?.[2] === PLACEHOLDER_KEY) return `${bearer[1]} ${key}`;
  return null;
}

/** An origin-form path with a `key=<placeholder>` query parameter swapped (null for anything but origin form). */
export function withKeyQuery(path: string, key: string): string | null {
  if (!path.startsWith('/') || path.startsWith('//')) return null;
  const q = path.indexOf('?');
  if (q < 0) return path;
  const params = new URLSearchParams(path.slice(q + 1));
  if (!params.has('key')) return path;
  if (params.get('key') === PLACEHOLDER_KEY) params.set('key', key);
  else params.delete('key');
  return `${path.slice(0, q)}?${params.toString()}`;
}
