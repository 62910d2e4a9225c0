import { createConnection, createServer, type Server, type Socket } from 'node:net';
import type { Bridge } from './types.ts';

/** Host-side bridges of one attempt (landlock and none modes): a 127.0.0.1 listener per bridge. */
export interface HostBridges {
  urls: Record<string, string>;
  ports: number[];
  close(): Promise<void>;
}

/**
 * Opens a listener on 127.0.0.1 (an ephemeral port) for each bridge, relaying every connection to its
 * Unix socket. Contract: rejects (and closes what it opened) when a listener cannot be opened;
 * `close()` never throws, ends the open connections and is idempotent.
 */
export async function openHostBridges(bridges: ReadonlyArray<Bridge>): Promise<HostBridges> {
  const servers: Server[] = [];
  const sockets = new Set<Socket>();
  const urls: Record<string, string> = {};
  const ports: number[] = [];
  let closed: Promise<void> | null = null;
  const close = (): Promise<void> => {
    closed ??= (async () => {
      for (const s of sockets) s.destroy();
      await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
    })();
    return closed;
  };
  try {
    for (const bridge of bridges) {
      const server = createServer((client) => {
        const upstream = createConnection(bridge.socket);
        for (const s of [client, upstream]) {
          sockets.add(s);
          s.on('error', () => {
            client.destroy();
            upstream.destroy();
          });
          s.on('close', () => sockets.delete(s));
        }
        client.pipe(upstream);
        upstream.pipe(client);
      });
      servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, '127.0.0.1', () => resolve());
      });
      const address = server.address();
      if (address === null || typeof address === 'string') throw new Error(`bridge ${bridge.name}: no TCP port`);
      ports.push(address.port);
      urls[bridge.name] = `http://127.0.0.1:${address.port}`;
    }
  } catch (error) {
    await close();
    throw error;
  }
  return { urls, ports, close };
}
