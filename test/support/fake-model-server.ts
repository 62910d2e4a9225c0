// The scripted OpenAI-compatible model lives in src/demo (users run it with `sessiond demo --serve-model`).
import { createConnection, createServer, type Server } from 'node:net';

export * from '../../src/demo/model-server.ts';
export * from '../../src/demo/model-scripts.ts';

/**
 * A Unix socket at `path` relayed to `port` on loopback: the far end of an attempt's model bridge
 * (where the egress proxy sits), straight to a fake model. Closed with the returned server.
 */
export async function socketRelay(path: string, port: number): Promise<Server> {
  const relay = createServer((client) => {
    const upstream = createConnection(port, '127.0.0.1');
    client.pipe(upstream).pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  await new Promise<void>((resolve) => relay.listen(path, resolve));
  return relay;
}
