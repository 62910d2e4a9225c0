import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import type { BrowserContext, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { launchChromium } from '../../support/browser.ts';
import { loadConfig } from '../../../src/config/config.ts';
import { startServer, type RunningServer } from '../../../src/interfaces/http/server.ts';
import { leftovers } from '../../support/lifecycle.ts';
import type { PiEnv } from '../../support/pi-env.ts';
import { until, useRuntimeSuite, type Harness } from '../../support/runtime.ts';
import { internals } from '../../../src/runtime/internals.ts';
import { clientOver } from '../../../src/api/bind.ts';

/** The dashboard's Delete session button, in Debian's chromium: confirmed, a running turn is cancelled, the session is gone. */

let env: PiEnv;
let h: Harness;
let server: RunningServer;
let context: BrowserContext;
let page: Page;
let userDataDir: string;

useRuntimeSuite(
  'delete-button',
  {
    scripts: { 'slow-words': { text: Array.from({ length: 300 }, (_, i) => ` w${i}`), chunkDelayMs: 100 } },
    cleanup: async () => {
      await context?.close();
      if (userDataDir !== undefined) rmSync(userDataDir, { recursive: true, force: true });
      await server?.close(1000);
    },
  },
  async (s) => {
    ({ env, h } = s);
    await h.startWorker();
    server = await startServer({
      client: clientOver(h.runtime),
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

describe('dashboard: Delete session', () => {
  it('asks first; confirmed, it cancels the running turn, removes the session and goes back to the list', async () => {
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Talk slowly',
      options: { provider: 'fake', model: 'slow-words', cwd: env.cwd },
    });
    await until(async () => (await h.runtime.getSession(sessionId))?.state === 'running', 30_000, 'the turn to run');
    await page.goto(`${server.url}/sessions/${encodeURIComponent(sessionId)}`);

    // Dismissed: nothing happens.
    page.once('dialog', (dialog) => void dialog.dismiss());
    await page.getByTestId('delete').click();
    await new Promise((r) => setTimeout(r, 500));
    expect((await h.runtime.getSession(sessionId))?.state).toBe('running');

    page.once('dialog', (dialog) => {
      expect(dialog.message()).toContain(`Delete session ${sessionId}?`);
      void dialog.accept();
    });
    await page.getByTestId('delete').click();
    await page.waitForURL(`${server.url}/`);
    expect(await h.runtime.getSession(sessionId)).toBeNull();
    expect(await leftovers(internals(h.runtime).redis, internals(h.runtime).keys, sessionId)).toEqual([]);
    await expect.poll(() => page.locator(`tr[data-session-id="${sessionId}"]`).count(), { timeout: 10_000 }).toBe(0);
  });
});
