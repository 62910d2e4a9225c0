import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { dashboardModules, registerDashboard } from '../../../src/interfaces/web/routes.ts';
import { SESSION_STATES, SETTLED_STATES } from '../../../machines/states.ts';

function dashboard(): Hono {
  const app = new Hono();
  registerDashboard(app, { tokenRequired: false });
  return app;
}

/** The relative imports of a module, resolved to paths under /web/. */
function importsOf(path: string, text: string): string[] {
  const base = new URL(path, 'http://x');
  return [...text.matchAll(/^\s*import\s[^'"]*['"](\.[^'"]+)['"]/gm)].map((m) => new URL(m[1] ?? '', base).pathname);
}

describe('dashboard routes', () => {
  it('serve the page shell with the session states injected', async () => {
    const html = await (await dashboard().request('/')).text();
    expect(html).toContain(`<meta name="sessiond-session-states" content="${SESSION_STATES.join(' ')}">`);
    expect(html).toContain(`<meta name="sessiond-settled-states" content="${SETTLED_STATES.join(' ')}">`);
    expect(html).toContain('cancelInterrupted');
  });

  it('serve every module the dashboard imports, from app.js down, as JavaScript', async () => {
    const app = dashboard();
    const seen = new Set<string>();
    const queue = ['/web/app.js'];
    while (queue.length > 0) {
      const path = queue.shift() as string;
      if (seen.has(path)) continue;
      seen.add(path);
      const response = await app.request(path);
      expect(response.status, path).toBe(200);
      expect(response.headers.get('content-type'), path).toBe('text/javascript; charset=utf-8');
      expect(response.headers.get('x-content-type-options'), path).toBe('nosniff');
      queue.push(...importsOf(path, await response.text()));
    }
    expect([...seen].sort()).toEqual([...dashboardModules().keys()].sort());
    expect(seen).toContain('/web/chart-layout.js');
    expect(seen).toContain('/web/session-page.js');
    const style = await app.request('/web/style.css');
    expect(style.headers.get('content-type')).toBe('text/css; charset=utf-8');
  });

  it('serve nothing else from disk', async () => {
    const app = dashboard();
    for (const path of [
      '/web/routes.ts',
      '/web/index.html',
      '/web/bull-board.ts',
      '/web/../http/app.ts',
      '/web/%2e%2e/routes.ts',
      '/web/pages/app.js',
      '/web/',
      '/web/app.js.map',
      '/web/nope.js',
    ]) {
      const response = await app.request(path);
      expect(response.status, path).toBe(404);
    }
  });
});
