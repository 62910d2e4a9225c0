import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Hono } from 'hono';
import { FAILURE_CATEGORIES, MESSAGE_TYPES } from '../../protocol/messages.ts';

const DIR = dirname(fileURLToPath(import.meta.url));

/** The dashboard's pages only load what this server serves; no inline script or style. */
const PAGE_HEADERS = {
  'Content-Security-Policy': "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
  'Cache-Control': 'no-cache',
};

/**
 * The dashboard: one HTML shell (`/` and `/sessions/:id`) and one plain
 * JavaScript module that renders from the HTTP API. No build step.
 */
export function registerDashboard(app: Hono, options: { tokenRequired: boolean }): void {
  const html = readFileSync(join(DIR, 'index.html'), 'utf8')
    .replace('{{TOKEN_REQUIRED}}', String(options.tokenRequired))
    .replace('{{MESSAGE_TYPES}}', MESSAGE_TYPES.join(' '))
    .replace('{{FAILURE_CATEGORIES}}', FAILURE_CATEGORIES.join(' '));
  const script = readFileSync(join(DIR, 'app.js'), 'utf8');
  const style = readFileSync(join(DIR, 'style.css'), 'utf8');
  app.get('/', (c) => c.html(html, 200, PAGE_HEADERS));
  app.get('/sessions/:id', (c) => c.html(html, 200, PAGE_HEADERS));
  app.get('/web/app.js', (c) => c.body(script, 200, { 'Content-Type': 'text/javascript; charset=utf-8', 'Cache-Control': 'no-cache', 'X-Content-Type-Options': 'nosniff' }));
  app.get('/web/style.css', (c) => c.body(style, 200, { 'Content-Type': 'text/css; charset=utf-8', 'Cache-Control': 'no-cache', 'X-Content-Type-Options': 'nosniff' }));
}
