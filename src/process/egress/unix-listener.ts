import { rm } from 'node:fs/promises';
import type { Server } from 'node:net';
import type { Socket } from 'node:net';

/** A server listening on a Unix socket, with its connections tracked. */
export interface UnixListener {
  readonly socketPath: string;
  /** Stops listening, ends every open connection, removes the socket file. Idempotent; never throws. */
  close(): Promise<void>;
}

/** Listens on `socketPath` (mode 0600 by the process umask of the caller's dir) and tracks connections so close() leaves none. */
export async function listenUnix(server: Server, socketPath: string): Promise<UnixListener> {
  const open = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  });
  await rm(socketPath, { force: true });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => {
      server.off('error', reject);
      resolve();
    });
  });
  let closing: Promise<void> | null = null;
  return {
    socketPath,
    close: () =>
      (closing ??= (async () => {
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        for (const socket of open) socket.destroy();
        await closed;
        // A socket file left behind is dead: nothing listens on it any more.
        await rm(socketPath, { force: true }).catch(() => undefined);
      })()),
  };
}
