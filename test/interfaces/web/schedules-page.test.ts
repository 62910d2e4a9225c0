import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import type { BrowserContext, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { launchChromium } from '../../support/browser.ts';
import { loadConfig } from '../../../src/config/config.ts';
import { startServer, type RunningServer } from '../../../src/interfaces/http/server.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import type { PiEnv } from '../../support/pi-env.ts';
import { TEST_POLICY, until, useRuntimeSuite, type Harness } from '../../support/runtime.ts';
import { clientOver } from '../../../src/api/bind.ts';

/**
 * The dashboard's Schedules page in Debian's chromium, over the HTTP routes of schedules: a schedule added through
 * `POST /api/schedules` is listed with its next run, then its last run and outcome once a real worker fired it;
 * Pause and Resume change it. A bad field is a 400 naming it, nothing added.
 */

let env: PiEnv;
let h: Harness;
let runtime: Runtime;
let server: RunningServer;
let context: BrowserContext;
let page: Page;
let userDataDir: string;

useRuntimeSuite(
  'schedules-page',
  {
    cleanup: async () => {
      await context?.close();
      if (userDataDir !== undefined) rmSync(userDataDir, { recursive: true, force: true });
      await server?.close(1000);
    },
  },
  async (s) => {
    ({ env, h } = s);
    await h.startWorker();
    runtime = new Runtime({
      connect: h.connect,
      prefix: h.prefix,
      policy: TEST_POLICY,
      schedules: { minIntervalMs: 1000 },
    });
    server = await startServer({
      client: clientOver(runtime),
      config: loadConfig({ prefix: h.prefix }, {}),
      logger: pino({ level: 'silent' }),
      port: 0,
    });
    userDataDir = mkdtempSync(join(tmpdir(), 'sessiond-chromium-'));
    context = await launchChromium(userDataDir);
    page = context.pages()[0] ?? (await context.newPage());
    page.setDefaultTimeout(30_000);
  },
);

async function post(path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const r = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

describe('dashboard: Schedules', () => {
  it('lists a schedule with its next run, then its last run and outcome; Pause and Resume', async () => {
    const { sessionId } = await runtime.enqueue({
      prompt: 'Say hello',
      options: { provider: 'fake', model: 'text', cwd: env.cwd },
    });
    const bad = await post('/api/schedules', { cron: '61 * * * *', sessionId, prompt: 'Again' });
    expect(bad.status).toBe(400);
    expect(bad.body.issues).toEqual([{ field: 'cron', message: expect.stringContaining('not a cron expression') }]);
    expect((await fetch(`${server.url}/api/schedules`).then((r) => r.json())) as unknown).toEqual({ schedules: [] });

    const added = await post('/api/schedules', { id: 'morning', every: '3s', sessionId, prompt: 'Again' });
    expect(added.status).toBe(201);
    expect(added.body).toMatchObject({ id: 'morning', owner: 'local', status: 'active', everyMs: 3000 });

    await page.goto(`${server.url}/`);
    await page.getByTestId('schedules-link').click();
    const row = page.locator('tr[data-schedule="morning"]');
    await expect.poll(() => row.getByTestId('schedule-status').textContent()).toBe('active');
    expect(await row.getByTestId('schedule-next').textContent()).not.toBe('–');
    await expect.poll(() => row.getByTestId('schedule-outcome').textContent(), { timeout: 60_000 }).toBe('enqueued');
    expect(await row.getByTestId('schedule-last').textContent()).toContain(sessionId);
    await page.screenshot({ path: '/tmp/sessiond-dashboard-schedules.png', fullPage: true });

    await row.getByTestId('pause-schedule').click();
    await expect.poll(() => row.getByTestId('schedule-status').textContent()).toBe('paused');
    expect(await row.getByTestId('schedule-next').textContent()).toBe('–');
    expect((await runtime.getSchedule('morning')).status).toBe('paused');
    await row.getByTestId('resume-schedule').click();
    await expect.poll(() => row.getByTestId('schedule-status').textContent()).toBe('active');

    const removed = await fetch(`${server.url}/api/schedules/morning`, { method: 'DELETE' });
    expect(removed.status).toBe(200);
    expect((await fetch(`${server.url}/api/schedules/morning`)).status).toBe(404);
    await expect.poll(() => row.count()).toBe(0);
    await until(
      async () => ['completed', 'failed'].includes((await runtime.getSession(sessionId))?.state ?? '') || null,
      120_000,
      'the session to finish its turns',
    );
    await runtime.close();
  });
});
