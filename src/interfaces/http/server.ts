import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import { createApp, type AppOptions } from './app.ts';
import { isLoopbackHost } from './auth/hosts.ts';

export interface StartServerOptions extends Omit<AppOptions, 'signal'> {
  /** Overrides config.http.host / config.http.port. */
  host?: string;
  port?: number;
}

export interface RunningServer {
  /** e.g. `http://127.0.0.1:7420` (`https://` with TLS) */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /**
   * Stops accepting connections, ends every live event stream, lets requests
   * in flight finish for up to `graceMs`, then closes what is left. Idempotent.
   */
  close(graceMs?: number): Promise<void>;
}

/**
 * Binds the API (and dashboard) on host:port — 127.0.0.1:7420 by default.
 * Refuses to bind to anything but loopback without an API token.
 */
export async function startServer(options: StartServerOptions): Promise<RunningServer> {
  const host = options.host ?? options.config.http.host;
  const port = options.port ?? options.config.http.port;
  if (!isLoopbackHost(host) && options.config.http.token === undefined && options.config.http.tokens.length === 0) {
    throw new Error(
      `refusing to listen on ${host} without an API token: set SESSIOND_API_TOKEN (at least 16 characters) or http.tokens / SESSIOND_API_TOKENS_FILE, or bind to 127.0.0.1`,
    );
  }
  const config = { ...options.config, http: { ...options.config.http, host, port } };
  const shutdown = new AbortController();
  const tls = readTls(config.http);
  const app = createApp({ ...options, config, signal: shutdown.signal, secureCookies: tls !== null });
  const server = (
    tls === null
      ? createAdaptorServer({ fetch: app.fetch })
      : createAdaptorServer({ fetch: app.fetch, createServer: createHttpsServer, serverOptions: tls })
  ) as Server;
  await new Promise<void>((resolve, reject) => {
    const onError = (error: Error): void => reject(new Error(`cannot listen on ${host}:${port}: ${error.message}`));
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  let closing: Promise<void> | null = null;
  return {
    url: `${tls === null ? 'http' : 'https'}://${shown}:${address.port}`,
    host: address.address,
    port: address.port,
    close(graceMs = 5000) {
      closing ??= new Promise<void>((resolve) => {
        shutdown.abort();
        const timer = setTimeout(() => server.closeAllConnections(), graceMs);
        // Connections turn idle as their requests (event streams included) end: close them as they do.
        const sweep = setInterval(() => server.closeIdleConnections(), 50);
        timer.unref();
        sweep.unref();
        server.close(() => {
          clearTimeout(timer);
          clearInterval(sweep);
          resolve();
        });
        server.closeIdleConnections();
      });
      return closing;
    },
  };
}

/** `http.tlsCert` / `http.tlsKey` (PEM files): HTTPS without a proxy. A file that cannot be read is an error naming it. */
function readTls(http: StartServerOptions['config']['http']): { cert: Buffer; key: Buffer } | null {
  if (http.tlsCert === undefined || http.tlsKey === undefined) return null;
  const read = (file: string, what: string): Buffer => {
    try {
      return readFileSync(file);
    } catch (error) {
      throw new Error(`cannot read the TLS ${what} ${file}: ${(error as Error).message}`);
    }
  };
  return { cert: read(http.tlsCert, 'certificate (--tls-cert)'), key: read(http.tlsKey, 'key (--tls-key)') };
}
