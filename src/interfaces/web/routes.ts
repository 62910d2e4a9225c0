import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Hono } from 'hono';
import { SESSION_STATES, SETTLED_STATES } from '../../../machines/states.ts';
import { FAILURE_CATEGORIES, MESSAGE_TYPES } from '../../protocol/messages.ts';
import { html, mountRoutes, routeFor } from '../http/route.ts';

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

const SCRIPT_HEADERS = {
  'Content-Type': 'text/javascript; charset=utf-8',
  'Cache-Control': 'no-cache',
  'X-Content-Type-Options': 'nosniff',
};

/** The dashboard's ES modules: every `.js` file of this folder, by its path under /web/ (`/web/{module}`). */
export function dashboardModules(dir: string = DIR): Map<string, string> {
  const modules = new Map<string, string>();
  for (const name of readdirSync(dir).sort())
    if (name.endsWith('.js')) modules.set(`/web/${name}`, readFileSync(join(dir, name), 'utf8'));
  return modules;
}

/** What the dashboard serves, read once at start: nothing else is read from disk. */
export interface DashboardAssets {
  html: string;
  modules: Map<string, string>;
  style: string;
}

export function loadDashboard(options: { tokenRequired: boolean }): DashboardAssets {
  const html = readFileSync(join(DIR, 'index.html'), 'utf8')
    .replace('{{TOKEN_REQUIRED}}', String(options.tokenRequired))
    .replace('{{MESSAGE_TYPES}}', MESSAGE_TYPES.join(' '))
    .replace('{{FAILURE_CATEGORIES}}', FAILURE_CATEGORIES.join(' '))
    .replace('{{SESSION_STATES}}', SESSION_STATES.join(' '))
    .replace('{{SETTLED_STATES}}', SETTLED_STATES.join(' '));
  return { html, modules: dashboardModules(), style: readFileSync(join(DIR, 'style.css'), 'utf8') };
}

const defineRoute = routeFor<DashboardAssets>();

/**
 * The dashboard: one HTML shell (`/`, `/sessions/:id`, `/policy`, `/limits`, `/schedules`) and native ES modules
 * (app.js and what it imports) that render from the HTTP API. No build step.
 */
/** A page of the dashboard: the one HTML shell, which renders the page its path names. */
const shellRoute = (path: string, operationId: string, summary: string) =>
  defineRoute({
    method: 'get',
    path,
    operationId,
    tags: ['dashboard'],
    summary,
    scope: 'public',
    responses: { '200': html('the page') },
    handler: (c, _input, { html }) => c.html(html, 200, PAGE_HEADERS),
  });

export const dashboardRoutes = [
  shellRoute('/', 'dashboard', 'The dashboard: sessions by state'),
  shellRoute('/policy', 'dashboardPolicy', 'The dashboard: the deployment policy and the global retry policy'),
  shellRoute('/limits', 'dashboardLimits', 'The dashboard: the fleet limits and paused dispatch'),
  shellRoute(
    '/webhooks',
    'dashboardWebhooks',
    'The dashboard: webhook events waiting for delivery, and the dead letters',
  ),
  shellRoute('/schedules', 'dashboardSchedules', 'The dashboard: the schedules with their next and last runs'),
  defineRoute({
    method: 'get',
    path: '/sessions/{id}',
    operationId: 'dashboardSession',
    tags: ['dashboard'],
    summary: 'The dashboard page of a session',
    scope: 'public',
    // The page says when a session is unknown.
    anyId: true,
    responses: { '200': html('the page') },
    handler: (c, _input, { html }) => c.html(html, 200, PAGE_HEADERS),
  }),
  defineRoute({
    method: 'get',
    path: '/web/style.css',
    operationId: 'dashboardStyle',
    tags: ['dashboard'],
    summary: "The dashboard's style sheet",
    scope: 'public',
    responses: { '200': { description: 'CSS', content: { 'text/css': { schema: { type: 'string' } } } } },
    handler: (c, _input, { style }) =>
      c.body(style, 200, {
        'Content-Type': 'text/css; charset=utf-8',
        'Cache-Control': 'no-cache',
        'X-Content-Type-Options': 'nosniff',
      }),
  }),
  // One route for the modules; a name not read at start is a 404.
  defineRoute({
    method: 'get',
    path: '/web/{module}',
    operationId: 'dashboardScript',
    tags: ['dashboard'],
    summary: "One of the dashboard's ES modules (app.js and what it imports)",
    scope: 'public',
    parameters: [
      {
        name: 'module',
        in: 'path',
        required: true,
        schema: { type: 'string', pattern: '^[a-z-]+\\.js$' },
        example: 'app.js',
      },
    ],
    responses: {
      '200': { description: 'JavaScript module', content: { 'text/javascript': { schema: { type: 'string' } } } },
      '404': { description: 'no such module' },
    },
    handler(c, _input, { modules }) {
      const script = modules.get(`/web/${c.req.param('module') ?? ''}`);
      return script === undefined ? c.notFound() : c.body(script, 200, SCRIPT_HEADERS);
    },
  }),
];

/** Serves the dashboard on `app`. */
export function registerDashboard(app: Hono, options: { tokenRequired: boolean }): void {
  mountRoutes(app, dashboardRoutes, loadDashboard(options));
}
