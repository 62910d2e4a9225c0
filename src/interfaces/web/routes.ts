import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Hono } from 'hono';
import { SESSION_STATES, SETTLED_STATES } from '../../../machines/states.ts';
import { FAILURE_CATEGORIES, MESSAGE_TYPES } from '../../protocol/messages.ts';

const DIR = dirname(fileURLToPath(import.meta.url));

/** The dashboard's pages only load what this server serves; no inline script or style. */
const PAGE_HEADERS = {
  'Content-Security-Policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
  'Cache-Control': 'no-cache',
};

const SCRIPT_HEADERS = { 'Content-Type': 'text/javascript; charset=utf-8', 'Cache-Control': 'no-cache', 'X-Content-Type-Options': 'nosniff' };

/** The dashboard's ES modules: every `.js` file of this folder, by its path under /web/ (`/web/{module}`). */
export function dashboardModules(dir: string = DIR): Map<string, string> {
  const modules = new Map<string, string>();
  for (const name of readdirSync(dir).sort()) if (name.endsWith('.js')) modules.set(`/web/${name}`, readFileSync(join(dir, name), 'utf8'));
  return modules;
}

/**
 * The dashboard: one HTML shell (`/` and `/sessions/:id`) and native ES modules
 * (app.js and what it imports) that render from the HTTP API. No build step. The
 * modules are read once at start and served by name; nothing else is read from disk.
 */
export function registerDashboard(app: Hono, options: { tokenRequired: boolean }): void {
  const html = readFileSync(join(DIR, 'index.html'), 'utf8')
    .replace('{{TOKEN_REQUIRED}}', String(options.tokenRequired))
    .replace('{{MESSAGE_TYPES}}', MESSAGE_TYPES.join(' '))
    .replace('{{FAILURE_CATEGORIES}}', FAILURE_CATEGORIES.join(' '))
    .replace('{{SESSION_STATES}}', SESSION_STATES.join(' '))
    .replace('{{SETTLED_STATES}}', SETTLED_STATES.join(' '));
  const modules = dashboardModules();
  const style = readFileSync(join(DIR, 'style.css'), 'utf8');
  app.get('/', (c) => c.html(html, 200, PAGE_HEADERS));
  app.get('/sessions/:id', (c) => c.html(html, 200, PAGE_HEADERS));
  app.get('/web/style.css', (c) => c.body(style, 200, { 'Content-Type': 'text/css; charset=utf-8', 'Cache-Control': 'no-cache', 'X-Content-Type-Options': 'nosniff' }));
  // One route for the modules (`/web/{module}` in the OpenAPI document); a name not read at start is a 404.
  app.get('/web/:module', (c) => {
    const script = modules.get(`/web/${c.req.param('module')}`);
    return script === undefined ? c.notFound() : c.body(script, 200, SCRIPT_HEADERS);
  });
}
