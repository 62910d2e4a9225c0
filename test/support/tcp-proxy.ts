import { createConnection, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 to `127.0.0.1:<target>`, standing for the network between one worker and
 * Redis: close() cuts every connection through it and refuses new ones (a partition); open() listens
 * again on the same port (the network is back).
 */
export class TcpProxy {
  readonly #target: number;
  #server: Server | null = null;
  readonly #sockets = new Set<Socket>();
  /** The port it listens on (chosen by the first open()). */
  port = 0;

  constructor(target: number) {
    this.#target = target;
  }

  /** A Redis URL like `url` that goes through this proxy. */
  url(url: string): string {
    const proxied = new URL(url);
    proxied.port = String(this.port);
    return proxied.toString();
  }

  async open(): Promise<void> {
    const server = createServer((client) => {
      const upstream = createConnection(this.#target, '127.0.0.1');
      for (const socket of [client, upstream]) {
        this.#sockets.add(socket);
        socket.on('close', () => this.#sockets.delete(socket));
        // A cut connection: its other side is destroyed with it (below), nothing more to do.
        socket.on('error', () => undefined);
      }
      client.pipe(upstream).pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    const address = server.address();
    if (address !== null && typeof address === 'object') this.port = address.port;
    this.#server = server;
  }

  async close(): Promise<void> {
    const server = this.#server;
    this.#server = null;
    for (const socket of this.#sockets) socket.destroy();
    if (server !== null) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
