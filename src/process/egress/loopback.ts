import { connect, createServer, type AddressInfo, type Socket } from 'node:net';

/** A TCP listener on 127.0.0.1 piping each connection to a Unix socket. */
export interface LoopbackBridge {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  close(): Promise<void>;
}

/**
 * How an attempt without a sandbox reaches a Unix socket of its egress: a loopback port (HTTP
 * clients take no Unix socket in HTTPS_PROXY). Inside a sandbox the sandbox's own bridges do this.
 * Contract: close() ends every connection.
 */
export async function loopbackBridge(socketPath: string, maxConnections = 64): Promise<LoopbackBridge> {
  const open = new Set<Socket>();
  const server = createServer((client) => {
    open.add(client);
    const upstream = connect(socketPath);
    open.add(upstream);
    client.once('close', () => {
      open.delete(client);
      upstream.destroy();
    });
    upstream.once('close', () => {
      open.delete(upstream);
      client.destroy();
    });
    client.on('error', () => client.destroy());
    upstream.on('error', () => upstream.destroy());
    client.pipe(upstream).pipe(client);
  });
  server.maxConnections = maxConnections;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  let closing: Promise<void> | null = null;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of open) socket.destroy();
      })),
  };
}
