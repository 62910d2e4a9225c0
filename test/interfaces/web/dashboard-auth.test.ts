import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import type { BrowserContext, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { launchChromium } from '../../support/browser.ts';
import { loadConfig, type Config } from '../../../src/config/config.ts';
import { startServer, type RunningServer } from '../../../src/interfaces/http/server.ts';
import { type PiEnv } from '../../support/pi-env.ts';
import { until, useRuntimeSuite, type Harness } from '../../support/runtime.ts';
import { clientOver } from '../../../src/api/bind.ts';

/**
 * The dashboard's login in Debian's chromium: a read token sees the list and
 * a live transcript but no cancel button; a write token cancels; logout leaves
 * the page with 401s; stream tickets that expire mid-stream lose no message.
 */

const WORDS = Array.from({ length: 40 }, (_, i) => (i === 0 ? 'tick0' : ` tick${i}`));
const TOKENS = {
  read: 'dash-read-token-0123456789',
  write: 'dash-write-token-0123456789',
  admin: 'dash-admin-token-0123456789',
};
const sha = (t: string) => createHash('sha256').update(t).digest('hex');

let env: PiEnv;
let h: Harness;
let server: RunningServer;
let context: BrowserContext;
let page: Page;
let userDataDir: string;
const pageErrors: string[] = [];

useRuntimeSuite(
  'dashboard-auth',
  {
    scripts: { 'ticking-text': { text: WORDS, chunkDelayMs: 100 } },
    cleanup: async () => {
      await context?.close();
      if (userDataDir !== undefined) rmSync(userDataDir, { recursive: true, force: true });
      await server?.close(1000);
    },
  },
  async (s) => {
    ({ env, h } = s);
    await h.startWorker();
    const base = loadConfig({ prefix: h.prefix }, {});
    const tokens = Object.entries(TOKENS).map(([scope, token]) => ({
      name: `${scope}-person`,
      scope: scope as 'read',
      sha256: sha(token),
    }));
    // Stream tickets of 1 s: a 4 s turn outlives several of them.
    const config: Config = { ...base, http: { ...base.http, tokens, streamTicketTtl: 1000 } };
    server = await startServer({ client: clientOver(h.runtime), config, logger: pino({ level: 'silent' }), port: 0 });
    userDataDir = mkdtempSync(join(tmpdir(), 'sessiond-chromium-'));
    context = await launchChromium(userDataDir);
    page = context.pages()[0] ?? (await context.newPage());
    page.setDefaultTimeout(30_000);
    page.on('pageerror', (error) => pageErrors.push(error.message));
  },
);

const eventually = <T>(probe: () => T | Promise<T>, timeout = 15_000) => expect.poll(probe, { timeout, interval: 100 });
const stateOf = (p: Page) => p.getByTestId('session-state').locator('[data-state]').getAttribute('data-state');
const statusFromPage = (path: string) => page.evaluate(async (p) => (await fetch(p)).status, path);

async function logIn(token: string): Promise<void> {
  await page.goto(`${server.url}/`);
  await page.getByTestId('login-token').fill(token);
  await page.getByTestId('login').click();
  await eventually(() => page.getByTestId('who').count()).toBe(1);
}

async function logOut(): Promise<void> {
  await page.getByTestId('logout').click();
  await eventually(() => page.getByTestId('login-form').count()).toBe(1);
}

describe('dashboard login', () => {
  it('a read token: the list and a live transcript (stream tickets renewed mid-stream, no message lost), no cancel button, no forms; the cookie is HttpOnly and SameSite=Strict', async () => {
    await page.goto(`${server.url}/`);
    await eventually(() => page.getByTestId('login-form').count()).toBe(1);
    expect(await statusFromPage('/api/sessions')).toBe(401);
    await page.getByTestId('login-token').fill('not-a-token-at-all-000');
    await page.getByTestId('login').click();
    await eventually(() => page.getByTestId('login-form').locator('.form-error').textContent()).toMatch(
      /invalid token/,
    );

    await logIn(TOKENS.read);
    expect(await page.getByTestId('who').textContent()).toBe('read-person · read');
    const [cookie] = await context.cookies(server.url);
    expect(cookie).toMatchObject({ name: 'sessiond_login', httpOnly: true, sameSite: 'Strict' });
    expect(await page.evaluate('document.cookie')).not.toContain('sessiond_login');
    expect(await page.getByTestId('new-session-form').count()).toBe(0);

    const { sessionId } = await h.runtime.enqueue({
      prompt: 'tick slowly',
      options: { provider: 'fake', model: 'ticking-text', cwd: env.cwd },
    });
    await eventually(() => page.locator(`tr[data-session-id="${sessionId}"]`).count()).toBe(1);
    await page.goto(`${server.url}/sessions/${encodeURIComponent(sessionId)}`);
    const text = page.getByTestId('transcript').getByTestId('assistant-text');
    await eventually(() => text.first().textContent(), 30_000).toMatch(/tick/);
    expect(await page.getByTestId('cancel').count()).toBe(0);
    expect(await page.getByTestId('prompt-form').count()).toBe(0);
    await eventually(() => stateOf(page), 30_000).toBe('completed');
    await eventually(() => text.first().textContent()).toBe(WORDS.join(''));
    const stored = await h.runtime.readMessages(sessionId);
    await eventually(() => page.getByTestId('transcript').getAttribute('data-last-seq')).toBe(String(stored.length));
    // The turn outlived its first ticket: the page opened the stream again with a new one.
    expect(Number(await page.getByTestId('transcript').getAttribute('data-streams'))).toBeGreaterThan(1);
    // Every assistant delta arrived exactly once (none lost across tickets, none doubled).
    expect(await page.getByTestId('transcript').locator('[data-testid="terminal"]').count()).toBe(1);
    await logOut();
  }, 90_000);

  it('a read token reads the policies and the fleet limits, and changes neither; admin may', async () => {
    await logIn(TOKENS.read);
    await page.getByTestId('policy-link').click();
    await eventually(() => page.getByTestId('policy-per-agent').locator('tr[data-agent="pi"]').count()).toBe(1);
    const form = page.getByTestId('policy-panel').getByTestId('policy-form');
    await eventually(() => form.locator('input[name="maxAttempts"]').inputValue()).not.toBe('');
    expect(await form.locator('input[name="maxAttempts"]').isDisabled()).toBe(true);
    expect(await page.getByTestId('policy-save').count()).toBe(0);
    await page.getByTestId('limits-link').click();
    await eventually(() => page.getByTestId('dispatch-state').getAttribute('data-paused')).toBe('false');
    expect(await page.locator('[data-testid^="pause-"], [data-testid^="resume-"]').count()).toBe(0);
    await page.screenshot({ path: '/tmp/sessiond-dashboard-limits-read.png', fullPage: true });
    await logOut();
    await logIn(TOKENS.admin);
    await page.goto(`${server.url}/policy`);
    await eventually(() => page.getByTestId('policy-save').count()).toBe(1);
    await page.goto(`${server.url}/limits`);
    await eventually(() => page.getByTestId('pause-dispatch').count()).toBe(1);
    await logOut();
  });

  it('logout: the login form again, and the API answers 401 to the page', async () => {
    await logIn(TOKENS.read);
    expect(await statusFromPage('/api/sessions')).toBe(200);
    await logOut();
    expect(await context.cookies(server.url)).toEqual([]);
    for (const path of ['/api/sessions', '/metrics', '/openapi.json', '/queues/api/queues'])
      expect(await statusFromPage(path), path).toBe(401);
    expect(await statusFromPage('/healthz')).toBe(200);
  });

  it('a write token cancels a running turn with the cancel button', async () => {
    await logIn(TOKENS.write);
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Sleep for a long time',
      options: { provider: 'fake', model: 'long-tool', cwd: env.cwd },
    });
    await page.goto(`${server.url}/sessions/${encodeURIComponent(sessionId)}`);
    await eventually(() => page.getByTestId('transcript').getByTestId('tool').count(), 30_000).toBe(1);
    await page.getByTestId('cancel').click();
    await eventually(() => stateOf(page), 30_000).toBe('cancelled');
    expect((await h.runtime.getSession(sessionId))?.context?.turn?.cancelReason).toBe('cancelled from the dashboard');
    // Write is not admin: the policy is shown, not editable.
    expect(await page.getByTestId('policy-save').count()).toBe(0);
    await logOut();
  }, 60_000);

  it('Bull Board behind the same login: read-only at /queues; its actions only at /queues-admin, for admin', async () => {
    await logIn(TOKENS.write);
    expect((await page.goto(`${server.url}/queues`))?.status()).toBe(200);
    expect(await statusFromPage('/queues-admin')).toBe(403);
    await page.goto(`${server.url}/`);
    expect(await page.getByTestId('queue-link').getAttribute('href')).toBe('/queues');
    await logOut();
    await logIn(TOKENS.admin);
    expect(await page.getByTestId('queue-link').getAttribute('href')).toBe('/queues-admin');
    expect((await page.goto(`${server.url}/queues-admin`))?.status()).toBe(200);
    await eventually(() => page.locator('body').textContent(), 15_000).toContain('sessions');
    await page.goto(`${server.url}/`);
    await logOut();
    await until(async () => pageErrors.length === 0 || null, 1000, 'no page errors').catch(() => undefined);
    expect(pageErrors).toEqual([]);
  }, 60_000);
});
