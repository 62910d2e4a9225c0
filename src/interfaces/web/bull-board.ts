import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { HonoAdapter } from '@bull-board/hono';
import { serveStatic } from '@hono/node-server/serve-static';
import type { Queue } from 'bullmq';
import type { Hono } from 'hono';

/**
 * Bull Board (the raw BullMQ queue: activation jobs) at `basePath`. Read-only
 * when the API has a token: Bull Board's own UI cannot send it, and its
 * actions (retry, clean, remove jobs) would bypass the API's auth otherwise.
 */
export function mountBullBoard(app: Hono, queue: Queue, options: { basePath: string; readOnly: boolean }): void {
  const adapter = new HonoAdapter(serveStatic);
  adapter.setBasePath(options.basePath);
  createBullBoard({
    queues: [
      new BullMQAdapter(queue, {
        readOnlyMode: options.readOnly,
        description: 'session activations (one job per activation; the session machine owns retries)',
      }),
    ],
    serverAdapter: adapter,
    options: { uiConfig: { boardTitle: 'sessiond queue', miscLinks: [{ text: 'sessiond dashboard', url: '/' }] } },
  });
  app.route(options.basePath, adapter.registerPlugin());
}
