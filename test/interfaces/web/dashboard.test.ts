import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import type { BrowserContext, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { launchChromium } from '../../support/browser.ts';
import { loadConfig } from '../../../src/config/config.ts';
import { startServer, type RunningServer } from '../../../src/interfaces/http/server.ts';
import { DEFAULT_RETRY_POLICY } from '../../../src/retry/index.ts';
import { DEFAULT_TEXT, type FakeModelServer } from '../../support/fake-model-server.ts';
import { type PiEnv } from '../../support/pi-env.ts';
import { useRuntimeSuite, type Harness } from '../../support/runtime.ts';
import { clientOver } from '../../../src/api/bind.ts';
import { internals } from '../../../src/runtime/internals.ts';
import { outboxKey, webhookFleetKeys } from '../../../src/runtime/webhooks/outbox-keys.ts';
import type { SessionWorker } from '../../../src/runtime/worker.ts';
import { rules, runtimeWith } from '../../support/limits.ts';

/**
 * The dashboard end to end: a real server, Runtime, worker running real pi
 * against the fake model, and Debian's chromium driven by playwright-core.
 */

const SLOW_WORDS = Array.from({ length: 40 }, (_, i) => (i === 0 ? 'word0' : ` word${i}`));

let model: FakeModelServer;
let env: PiEnv;
let h: Harness;
let server: RunningServer;
let worker: SessionWorker;
let context: BrowserContext;
let page: Page;
let userDataDir: string;
const pageErrors: string[] = [];

useRuntimeSuite(
  'dashboard',
  {
    scripts: { 'slow-text': { text: SLOW_WORDS, chunkDelayMs: 60 }, flaky: [{ status: 500 }, { text: DEFAULT_TEXT }] },
    cleanup: async () => {
      await context?.close();
      if (userDataDir !== undefined) rmSync(userDataDir, { recursive: true, force: true });
      await server?.close(1000);
    },
  },
  async (s) => {
    ({ server: model, env, h } = s);
    await startBrowserAndServer();
  },
);

async function startBrowserAndServer(): Promise<void> {
  worker = await h.startWorker();
  const config = loadConfig({ prefix: h.prefix }, {});
  // A worker gone for 5 s is gone (the default is three of the config's 5 s heartbeats).
  server = await startServer({
    client: clientOver(h.runtime),
    config,
    logger: pino({ level: 'silent' }),
    port: 0,
    workerStaleMs: 5000,
  });
  userDataDir = mkdtempSync(join(tmpdir(), 'sessiond-chromium-'));
  context = await launchChromium(userDataDir);
  page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(30_000);
  page.on('pageerror', (error) => pageErrors.push(error.message));
}

async function startSession(modelId: string, prompt: string): Promise<string> {
  await page.goto(`${server.url}/`);
  const form = page.getByTestId('new-session-form');
  await form.locator('textarea[name="prompt"]').fill(prompt);
  await form.locator('input[name="provider"]').fill('fake');
  await form.locator('input[name="model"]').fill(modelId);
  await form.locator('input[name="cwd"]').fill(env.cwd);
  await page.getByTestId('create-session').click();
  await page.waitForURL(/\/sessions\/[^/]+$/);
  return decodeURIComponent(new URL(page.url()).pathname.split('/').at(-1) ?? '');
}

/** expect.poll with room for a worker to run pi and the page to poll the API (vitest's default is 1 s). */
const eventually = <T>(probe: () => T | Promise<T>, timeout = 15_000) => expect.poll(probe, { timeout, interval: 100 });

const stateOf = (p: Page) => p.getByTestId('session-state').locator('[data-state]').getAttribute('data-state');

describe('dashboard', () => {
  it('an unknown session id shows "no such session" and stops: no buttons, no event stream', async () => {
    const requests: string[] = [];
    const onRequest = (r: { url(): string }) => void requests.push(new URL(r.url()).pathname);
    page.on('request', onRequest);
    try {
      const response = await page.request.get(`${server.url}/api/sessions/no-such-session-here`);
      expect(response.status()).toBe(404);
      await page.goto(`${server.url}/sessions/no-such-session-here`);
      await eventually(() => page.getByTestId('no-such-session').textContent()).toContain('No such session');
      expect(await page.getByTestId('no-such-session').textContent()).toContain('no-such-session-here');
      // Watched for a while: what a page that kept trying would have asked for by now (~20 streams in 5 s before).
      await new Promise((r) => setTimeout(r, 3000));
      const asked = (suffix: string) => requests.filter((p) => p === `/api/sessions/no-such-session-here${suffix}`);
      expect(asked('/events').length).toBeLessThanOrEqual(1);
      expect(asked('').length).toBe(1);
      expect(await page.locator('[data-testid="cancel"], [data-testid="delete"], [data-testid="retry"]').count()).toBe(
        0,
      );
      expect(await page.getByTestId('transcript').count()).toBe(0);
      await page.screenshot({ path: '/tmp/sessiond-dashboard-no-such-session.png', fullPage: true });
    } finally {
      page.off('request', onRequest);
    }
  });

  it('the policies page: the deployment policy as read, and the global retry policy changed; an invalid value is shown at its field and nothing is changed', async () => {
    await page.goto(`${server.url}/`);
    await page.getByTestId('policy-link').click();
    await page.waitForURL(/\/policy$/);
    const deployment = page.getByTestId('deployment-policy');
    await eventually(() => deployment.getByTestId('policy-per-agent').locator('tr[data-agent="pi"]').count()).toBe(1);
    const deploymentPolicy = await clientOver(h.runtime).deployment.policy();
    expect(await deployment.getByTestId('policy-agents').textContent()).toContain('pi');
    expect(await deployment.getByTestId('policy-maxPromptChars').textContent()).toBe(
      `${deploymentPolicy.maxPromptChars.toLocaleString('en-US')} characters`,
    );
    expect(await deployment.getByTestId('policy-workspace').textContent()).toBe(deploymentPolicy.workspace);
    await page.screenshot({ path: '/tmp/sessiond-dashboard-policy.png', fullPage: true });
    const form = page.getByTestId('policy-panel').getByTestId('policy-form');
    await eventually(() => form.locator('input[name="maxAttempts"]').inputValue()).toBe(
      String(DEFAULT_RETRY_POLICY.maxAttempts),
    );

    await form.locator('input[name="maxAttempts"]').fill('0');
    await form.locator('input[name="initialDelayMs"]').fill('abc');
    await page.getByTestId('policy-save').click();
    const maxError = form.locator('[data-error-for="maxAttempts"]');
    await eventually(() => maxError.textContent()).toMatch(/1 to 100/);
    await eventually(() => form.locator('[data-error-for="initialDelayMs"]').textContent()).toMatch(/0 to 3600000/);
    expect(await form.locator('.field.invalid input[name="maxAttempts"]').count()).toBe(1);
    await page.screenshot({ path: '/tmp/sessiond-dashboard-policy-error.png', fullPage: true });
    expect(await page.getByTestId('policy-panel').locator('.form-error').textContent()).toBe('');
    expect((await h.runtime.getPolicy()).policy).toEqual(DEFAULT_RETRY_POLICY);

    await form.locator('input[name="maxAttempts"]').fill('3');
    await form.locator('input[name="initialDelayMs"]').fill('300');
    await form.locator('input[name="jitter"]').fill('none');
    await page.getByTestId('policy-save').click();
    await eventually(() => page.getByTestId('policy-ok').textContent()).toBe('saved');
    expect(await maxError.textContent()).toBe('');
    const { policy, source } = await h.runtime.getPolicy();
    expect(source).toBe('global');
    expect(policy).toMatchObject({ maxAttempts: 3, initialDelayMs: 300, jitter: 'none' });
  });

  it('creates a session from the form and watches it stream; the chart highlights the state; the list shows it with its agent', async () => {
    const id = await startSession('slow-text', 'Count slowly');
    const text = page.getByTestId('transcript').getByTestId('assistant-text');
    await eventually(() => text.first().textContent(), 30_000).toMatch(/word2/);
    // Text arrived while the turn was still running: it streams.
    const whileStreaming = await text.first().textContent();
    expect(whileStreaming).not.toContain('word39');
    await eventually(() => page.locator('[data-testid="chart-svg"] g.state.current').getAttribute('data-state')).toBe(
      'running',
    );
    await eventually(() => stateOf(page), 30_000).toBe('completed');
    await eventually(() => text.first().textContent()).toBe(SLOW_WORDS.join(''));
    await eventually(() => page.locator('[data-testid="chart-svg"] g.state.current').getAttribute('data-state')).toBe(
      'completed',
    );
    expect(await page.getByTestId('session-agent').textContent()).toBe('pi');
    expect(await page.getByTestId('timeline').getByTestId('attempt').getAttribute('data-outcome')).toBe('completed');

    await page.goto(`${server.url}/`);
    const row = page.locator(`tr[data-session-id="${id}"]`);
    await eventually(() => row.getByTestId('state-badge').getAttribute('data-state')).toBe('completed');
    expect(await row.getByTestId('agent').textContent()).toBe('pi');
  });

  it('shows a retry on the attempt timeline: the failure category, the backoff delay and the tokens reported', async () => {
    model.setScript('flaky', [{ status: 500 }, { text: DEFAULT_TEXT }]);
    await startSession('flaky', 'Hello, flaky model');
    const timeline = page.getByTestId('timeline');
    await eventually(() => timeline.getByTestId('attempt').count(), 30_000).toBe(2);
    const first = timeline.locator('[data-testid="attempt"][data-attempt="1"]');
    expect(await first.getAttribute('data-outcome')).toBe('failed');
    expect(await first.getAttribute('data-category')).toBe('server_error');
    expect(await timeline.getByTestId('backoff').getAttribute('data-delay-ms')).toBe('300');
    expect(await timeline.getByTestId('backoff').textContent()).toContain('300 ms');
    await eventually(() => stateOf(page), 30_000).toBe('completed');
    await eventually(() =>
      timeline.locator('[data-testid="attempt"][data-attempt="2"]').getAttribute('data-outcome'),
    ).toBe('completed');
    await eventually(() => page.getByTestId('transcript').textContent()).toContain(DEFAULT_TEXT);
    expect(await page.getByTestId('transcript').textContent()).toMatch(/attempt 1 failed · server_error/);
    // The tokens the answer reported (the fake model's usage: 42 prompt, 7 completion), on its attempt and the session.
    expect(await first.getByTestId('attempt-tokens').count()).toBe(0);
    await eventually(() =>
      timeline.locator('[data-testid="attempt"][data-attempt="2"]').getByTestId('attempt-tokens').textContent(),
    ).toBe(' · 42 in / 7 out tokens');
    expect(await page.getByTestId('session-tokens').textContent()).toBe('42 in / 7 out');
    // The path the turn took, in order, each step with why it was taken; the full chart is folded away.
    const steps = page.getByTestId('path').getByTestId('path-step');
    await eventually(() => steps.evaluateAll((els) => els.map((el) => el.getAttribute('data-state')))).toEqual([
      'queued',
      'running',
      'backoff',
      'running',
      'completed',
    ]);
    expect(await page.getByTestId('path').getByTestId('path-label').allTextContents()).toEqual([
      'a prompt arrived',
      'the attempt ended',
      'the backoff ended',
      'the attempt ended',
    ]);
    expect(await page.getByTestId('chart-svg').isVisible()).toBe(false);
    await page.screenshot({ path: '/tmp/sessiond-dashboard-session.png', fullPage: true });
    await page.getByTestId('chart-details').locator('summary').click();
    expect(await page.getByTestId('chart-svg').isVisible()).toBe(true);
    // The chart marks the same transitions as taken (a backward edge's source is on its own path).
    const taken = await page
      .getByTestId('chart-svg')
      .evaluate((svg) =>
        [...svg.querySelectorAll('g.edge.taken')]
          .flatMap((g) =>
            g.hasAttribute('data-from')
              ? [`${g.getAttribute('data-from')}>${g.getAttribute('data-to')}`]
              : [...g.querySelectorAll('path.taken[data-from]')].map(
                  (p) => `${p.getAttribute('data-from')}>${g.getAttribute('data-to')}`,
                ),
          )
          .sort(),
      );
    expect(taken).toEqual(['backoff>running', 'idle>running', 'running>backoff', 'running>completed']);
    // Laid out as drawn: no edge label on another, on a state, or cut by the drawing's edge (boxes measured by Chromium).
    // (No named function inside: the page gets the callback's source as it is.)
    type Rect = { x: number; y: number; width: number; height: number };
    const measured = await page.getByTestId('chart-svg').evaluate((svg) => {
      const view = (svg as unknown as { viewBox: { baseVal: Rect } }).viewBox.baseVal;
      return {
        view: { x1: view.x, y1: view.y, x2: view.x + view.width, y2: view.y + view.height },
        labels: [...svg.querySelectorAll('text.label')].map((t) => {
          const b = (t as unknown as { getBBox(): Rect }).getBBox();
          return { text: t.textContent ?? '', x1: b.x, y1: b.y, x2: b.x + b.width, y2: b.y + b.height };
        }),
        states: [...svg.querySelectorAll('g.state rect')].map((r) => {
          const b = (r as unknown as { getBBox(): Rect }).getBBox();
          const text = r.parentElement?.getAttribute('data-state') ?? '';
          return { text, x1: b.x, y1: b.y, x2: b.x + b.width, y2: b.y + b.height };
        }),
      };
    });
    type Box = { text: string; x1: number; y1: number; x2: number; y2: number };
    const cross = (a: Box, b: Box) => a.x1 < b.x2 && b.x1 < a.x2 && a.y1 < b.y2 && b.y1 < a.y2;
    const problems: string[] = [];
    for (const [i, a] of measured.labels.entries()) {
      const v = measured.view;
      if (a.x1 < v.x1 || a.y1 < v.y1 || a.x2 > v.x2 || a.y2 > v.y2) problems.push(`"${a.text}" cut by the viewBox`);
      for (const b of measured.labels.slice(i + 1)) if (cross(a, b)) problems.push(`"${a.text}" on "${b.text}"`);
      for (const b of measured.states) if (cross(a, b)) problems.push(`"${a.text}" on the state ${b.text}`);
    }
    expect(measured.labels.length).toBeGreaterThan(20);
    expect(problems).toEqual([]);
    await page.screenshot({ path: '/tmp/sessiond-dashboard-session-chart.png', fullPage: true });
  });

  it('cancels a long tool call with the cancel button', async () => {
    const id = await startSession('long-tool', 'Sleep for a long time');
    const tool = page.getByTestId('transcript').getByTestId('tool');
    await eventually(() => tool.count(), 30_000).toBe(1);
    expect(await stateOf(page)).toBe('running');
    await page.getByTestId('cancel').click();
    await eventually(() => stateOf(page), 30_000).toBe('cancelled');
    await eventually(() => page.locator('[data-testid="chart-svg"] g.state.current').getAttribute('data-state')).toBe(
      'cancelled',
    );
    expect(await page.getByTestId('cancel').isDisabled()).toBe(true);
    // The tool call that was stopped is no longer shown as running: the log closes it (issue 28), then says the attempt was cancelled.
    await eventually(() => tool.locator('.status').textContent()).toBe('failed');
    expect(await tool.locator('pre').last().textContent()).toBe('the attempt was cancelled');
    const terminal = page.getByTestId('transcript').getByTestId('terminal');
    await eventually(() => terminal.textContent()).toBe('attempt 1 cancelled · cancelled from the dashboard');
    expect((await h.runtime.getSession(id))?.context?.turn?.cancelReason).toBe('cancelled from the dashboard');
    await page.screenshot({ path: '/tmp/sessiond-dashboard-cancelled.png', fullPage: true });
  });

  it('the sessions table groups by state and updates live; Bull Board is mounted at /queues', async () => {
    await page.goto(`${server.url}/`);
    await eventually(() => page.getByTestId('sessions-body').locator('tr[data-session-id]').count()).toBe(3);
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'from elsewhere',
      options: { provider: 'fake', model: 'text', cwd: env.cwd },
    });
    // Appears without a reload.
    await eventually(() => page.locator(`tr[data-session-id="${sessionId}"]`).count()).toBe(1);
    await eventually(
      () => page.locator(`tr[data-session-id="${sessionId}"] [data-testid="state-badge"]`).getAttribute('data-state'),
      30_000,
    ).toBe('completed');
    await page.getByTestId('state-filter').locator('button[data-state="cancelled"]').click();
    await eventually(() => page.getByTestId('sessions-body').locator('tr[data-session-id]').count()).toBe(1);
    await page.getByTestId('state-filter').locator('button', { hasText: 'all' }).click();
    await eventually(() => page.getByTestId('sessions-body').locator('tr[data-session-id]').count()).toBe(4);
    await page.screenshot({ path: '/tmp/sessiond-dashboard-home.png', fullPage: true });

    // Search by a piece of the id (any case), with the state filter on top; the address keeps the filters.
    const rows = page.getByTestId('sessions-body').locator('tr[data-session-id]');
    const piece = sessionId.slice(0, 8).toUpperCase();
    await page.getByTestId('session-search').fill(piece);
    await eventually(() => rows.evaluateAll((els) => els.map((el) => el.getAttribute('data-session-id')))).toEqual([
      sessionId,
    ]);
    expect(new URL(page.url()).searchParams.get('q')).toBe(piece);
    await page.getByTestId('state-filter').locator('button[data-state="cancelled"]').click();
    await eventually(() => rows.count()).toBe(0);
    expect(await page.getByTestId('no-sessions').textContent()).toBe('No session matches the filters.');
    await page.getByTestId('state-filter').locator('button[data-state="completed"]').click();
    await eventually(() => rows.count()).toBe(1);
    await page.getByTestId('agent-filter').selectOption('pi');
    await page.getByTestId('time-filter').selectOption({ label: 'in the last hour' });
    await eventually(() => new URL(page.url()).search).toBe(`?state=completed&q=${piece}&agent=pi&within=3600000`);
    expect(await rows.count()).toBe(1);
    await page.screenshot({ path: '/tmp/sessiond-dashboard-home-search.png', fullPage: true });
    // Opened from the address: the same filters, the same rows.
    await page.goto(`${server.url}/?q=${piece}&state=completed`);
    await eventually(() => page.getByTestId('session-search').inputValue()).toBe(piece);
    await eventually(() => rows.count()).toBe(1);
    await page.goto(`${server.url}/?q=no-session-has-this`);
    await eventually(() => page.getByTestId('no-sessions').textContent()).toBe('No session matches the filters.');

    const queues = await page.goto(`${server.url}/queues`);
    expect(queues?.status()).toBe(200);
    await eventually(() => page.locator('body').textContent(), 15_000).toContain('sessions');
    expect(pageErrors).toEqual([]);
  });
});

describe('dashboard: the fleet bar', () => {
  it('shows the live worker and its agents; paused dispatch with a Resume button that resumes it', async () => {
    const client = clientOver(h.runtime);
    await page.goto(`${server.url}/`);
    const bar = page.getByTestId('fleet-bar');
    await eventually(() => bar.getByTestId('workers-live').textContent()).toBe('1 worker live');
    expect(await bar.getByTestId('worker').count()).toBe(1);
    expect(await bar.getByTestId('worker-agents').textContent()).toContain('pi');
    expect(await bar.getByTestId('no-worker').count()).toBe(0);
    expect(await bar.getByTestId('dispatch-paused').count()).toBe(0);

    await client.dispatch.pause();
    try {
      await eventually(() => bar.getByTestId('dispatch-paused').textContent()).toContain('dispatch paused');
      // A session started meanwhile waits, and its row says why.
      const { sessionId } = await h.runtime.enqueue({
        prompt: 'while paused',
        options: { provider: 'fake', model: 'text', cwd: env.cwd },
      });
      const row = page.locator(`tr[data-session-id="${sessionId}"]`);
      await eventually(() => row.getByTestId('waiting-for').textContent(), 30_000).toBe('dispatch paused');
      await page.screenshot({ path: '/tmp/sessiond-dashboard-fleet-paused.png', fullPage: true });
      await bar.getByTestId('resume-dispatch').click();
      await eventually(async () => (await client.dispatch.status()).paused).toBe(false);
      await eventually(() => bar.getByTestId('dispatch-paused').count()).toBe(0);
      // The note is written when the page has the answer, which may come after the poll that redrew the bar.
      await eventually(() => bar.getByTestId('fleet-note').textContent()).toMatch(
        /^resumed: \d+ waiting sessions? woken$/,
      );
      await eventually(() => row.getByTestId('state-badge').getAttribute('data-state'), 30_000).toBe('completed');
    } finally {
      await client.dispatch.resume();
    }
    expect(pageErrors).toEqual([]);
  });
});

describe('dashboard: operator controls', () => {
  it('retries a failed turn with its button, and removes a queued prompt from the list', async () => {
    const { sessionId: failed } = await h.runtime.enqueue({
      prompt: 'fails at once',
      options: { provider: 'fake', model: 'http401', cwd: env.cwd },
    });
    await page.goto(`${server.url}/sessions/${encodeURIComponent(failed)}`);
    await eventually(() => stateOf(page), 60_000).toBe('failed');
    await eventually(() => page.getByTestId('retry').isDisabled()).toBe(false);
    await page.getByTestId('retry').click();
    await eventually(() => page.getByTestId('cancel-note').textContent()).toBe('retry queued as turn 2');
    await eventually(
      async () => (await h.runtime.getSession(failed))?.context?.turn?.retryOf?.turn ?? null,
      60_000,
    ).toBe(1);

    const { sessionId: busy } = await h.runtime.enqueue({
      prompt: 'Sleep a long time',
      options: { provider: 'fake', model: 'long-tool', cwd: env.cwd },
    });
    await h.runtime.enqueue({ sessionId: busy, prompt: 'a prompt to remove' });
    await page.goto(`${server.url}/sessions/${encodeURIComponent(busy)}`);
    const list = page.getByTestId('queued-prompts');
    await eventually(() => list.locator('li').count(), 30_000).toBe(1);
    expect(await list.locator('li').textContent()).toContain('a prompt to remove');
    await list.getByTestId('remove-prompt').click();
    await eventually(() => page.getByTestId('cancel-note').textContent(), 30_000).toBe('queued prompt removed');
    expect(await h.runtime.queuedPrompts(busy)).toEqual([]);
    await h.runtime.cancel(busy, 'done with the test');
    await eventually(() => stateOf(page), 60_000).toBe('cancelled');
    expect(pageErrors).toEqual([]);
  });
});

describe('dashboard: prompts, waiting sessions, limits', () => {
  it('a long prompt: two lines of it in the list, all of it on a click, and whole on the session page', async () => {
    const prompt = `${'Refactor the parser so that every token carries its position. '.repeat(6)}\nThen run the tests.`;
    expect(prompt.length).toBeGreaterThan(200);
    const { sessionId } = await h.runtime.enqueue({
      prompt,
      options: { provider: 'fake', model: 'text', cwd: env.cwd },
    });
    await page.goto(`${server.url}/?q=${encodeURIComponent(sessionId)}`);
    const cell = page.locator(`tr[data-session-id="${sessionId}"]`).getByTestId('prompt');
    await eventually(() => cell.count()).toBe(1);
    // Readable in place: a column of at least ~40 characters, cut to its first 200 characters.
    expect((await cell.boundingBox())?.width ?? 0).toBeGreaterThan(250);
    expect(await cell.getAttribute('title')).toContain(`${prompt.length} characters`);
    await page.screenshot({ path: '/tmp/sessiond-dashboard-home-prompt.png', fullPage: true });
    await cell.click();
    await eventually(() => cell.locator('.text').textContent()).toBe(prompt);
    await page.screenshot({ path: '/tmp/sessiond-dashboard-home-prompt-open.png', fullPage: true });

    await page.goto(`${server.url}/sessions/${encodeURIComponent(sessionId)}`);
    await eventually(() => stateOf(page), 30_000).toBe('completed');
    await h.runtime.enqueue({ sessionId, prompt: 'And a second, short one.' });
    const turns = page.getByTestId('prompts').getByTestId('turn-prompt');
    await eventually(() => turns.count(), 30_000).toBe(2);
    expect(await turns.nth(0).locator('pre').textContent()).toBe(prompt);
    expect(await turns.nth(1).locator('pre').textContent()).toBe('And a second, short one.');
    await eventually(() => stateOf(page), 30_000).toBe('completed');
    expect(await turns.nth(0).locator('pre').textContent()).toBe(prompt);
    await page.screenshot({ path: '/tmp/sessiond-dashboard-session-prompts.png', fullPage: true });
    expect(pageErrors).toEqual([]);
  });

  it('a queued session says when no live worker can take it — none live, then none with its agent — and stops once one can', async () => {
    const { redis: store, keys } = internals(h.runtime);
    await worker.close();
    /** A heartbeat of a worker that offers only `agents`, kept fresh while the test needs it. */
    let planted: string[] | null = null;
    const plant = setInterval(() => {
      if (planted === null) return;
      const beat = { id: 'codex-only', host: 'elsewhere', pid: 4242, lastSeen: Date.now(), active: 0, agents: planted };
      void store.hset(keys.workers, beat.id, JSON.stringify(beat));
    }, 300);
    try {
      const { sessionId } = await h.runtime.enqueue({
        prompt: 'waits for a worker',
        options: { provider: 'fake', model: 'text', cwd: env.cwd },
      });
      await page.goto(`${server.url}/sessions/${encodeURIComponent(sessionId)}`);
      const notice = page.getByTestId('no-worker-notice');
      await eventually(() => notice.getAttribute('data-reason')).toBe('no-worker');
      expect(await notice.isVisible()).toBe(true);
      expect(await notice.textContent()).toMatch(/No live worker.*waits queued until one runs \(sessiond worker\)/);
      await page.screenshot({ path: '/tmp/sessiond-dashboard-no-worker.png', fullPage: true });
      // A worker comes that cannot run pi: the page says so, and still waits.
      planted = ['codex'];
      await eventually(() => notice.getAttribute('data-reason')).toBe('no-agent');
      expect(await notice.textContent()).toContain(
        'No live worker offers the agent pi: the 1 live worker offers codex.',
      );
      expect(await stateOf(page)).toBe('queued');
      await page.screenshot({ path: '/tmp/sessiond-dashboard-no-agent.png', fullPage: true });
      // A worker that can: the notice goes, the turn runs.
      worker = await h.startWorker();
      await eventually(() => stateOf(page), 30_000).toBe('completed');
      expect(await notice.isVisible()).toBe(false);
    } finally {
      clearInterval(plant);
      planted = null;
      await store.hdel(keys.workers, 'codex-only');
    }
    expect(pageErrors).toEqual([]);
  });

  it('the fleet limits page: each limit with its use; admin pauses and resumes one limit and all dispatch', async () => {
    const rt = runtimeWith(h, rules([{ name: 'slow-model', match: { model: 'slow-text' }, maxConcurrent: 2 }]));
    const limited = clientOver(rt);
    const other = await startServer({
      client: limited,
      config: loadConfig({ prefix: h.prefix }, {}),
      logger: pino({ level: 'silent' }),
      port: 0,
    });
    try {
      await page.goto(`${other.url}/limits`);
      const row = page.locator('tr[data-limit="slow-model"]');
      await eventually(() => row.count()).toBe(1);
      expect(await row.textContent()).toContain('model slow-text');
      expect(await row.locator('td').nth(2).textContent()).toBe('2');
      expect(await page.getByTestId('dispatch-state').getAttribute('data-paused')).toBe('false');
      await page.screenshot({ path: '/tmp/sessiond-dashboard-limits.png', fullPage: true });

      await row.getByTestId('pause-limit').click();
      await eventually(() => row.getByTestId('limit-paused').count()).toBe(1);
      expect((await limited.dispatch.status()).limits[0]?.paused).toBe(true);
      expect(await page.getByTestId('limits-note').textContent()).toBe('paused: slow-model');
      await page.screenshot({ path: '/tmp/sessiond-dashboard-limits-paused.png', fullPage: true });
      await row.getByTestId('resume-limit').click();
      await eventually(() => row.getByTestId('limit-paused').count()).toBe(0);
      expect((await limited.dispatch.status()).limits[0]?.paused).toBe(false);

      await page.getByTestId('pause-dispatch').click();
      await eventually(() => page.getByTestId('dispatch-state').getAttribute('data-paused')).toBe('true');
      expect((await limited.dispatch.status()).paused).toBe(true);
      await page.getByTestId('resume-dispatch').click();
      await eventually(() => page.getByTestId('dispatch-state').getAttribute('data-paused')).toBe('false');
      expect((await limited.dispatch.status()).paused).toBe(false);

      // A deployment without limits says so.
      await page.goto(`${server.url}/limits`);
      await eventually(() => page.getByTestId('no-limits').isVisible()).toBe(true);
    } finally {
      await limited.dispatch.resume();
      await other.close(1000);
      await rt.close();
    }
    expect(pageErrors).toEqual([]);
  });
});

describe('dashboard: filters past the newest page', () => {
  it('searches by id and agent through the API: a session older than the newest 200 is found', async () => {
    // No worker: the sessions stay queued (nothing runs them).
    await worker.close();
    const needle = `needle-${Date.now()}`;
    await h.runtime.enqueue({ sessionId: needle, prompt: 'the oldest', options: { agent: 'codex' } });
    for (let i = 0; i < 205; i++) await h.runtime.enqueue({ prompt: `newer ${i}`, options: { cwd: env.cwd } });
    await page.goto(`${server.url}/`);
    const rows = page.getByTestId('sessions-body').locator('tr[data-session-id]');
    await eventually(() => rows.count()).toBe(200);
    expect(await page.locator(`tr[data-session-id="${needle}"]`).count()).toBe(0);
    expect(await page.getByTestId('sessions-count').textContent()).toBe('(200 shown, more further back)');
    await page.getByTestId('session-search').fill('NEEDLE-');
    await eventually(() => rows.evaluateAll((els) => els.map((el) => el.getAttribute('data-session-id')))).toEqual([
      needle,
    ]);
    await page.getByTestId('session-search').fill('');
    await page.getByTestId('agent-filter').selectOption('codex');
    await eventually(() => rows.evaluateAll((els) => els.map((el) => el.getAttribute('data-session-id')))).toEqual([
      needle,
    ]);
    await page.screenshot({ path: '/tmp/sessiond-dashboard-home-older.png', fullPage: true });
    await page.getByTestId('agent-filter').selectOption('');
    await eventually(() => rows.count()).toBe(200);
    await page.getByTestId('show-more').click();
    await eventually(() => page.locator(`tr[data-session-id="${needle}"]`).count()).toBe(1);
    // A filter the API refuses is said with its field.
    await page.getByTestId('session-search').fill('x'.repeat(101));
    await eventually(() => page.getByTestId('filter-error').textContent()).toBe('q: must be at most 100 characters');
    expect(pageErrors).toEqual([]);
  }, 120_000);
});

describe('dashboard: webhooks', () => {
  it('the webhooks page lists the dead letters and the events waiting; Replay from here puts one back', async () => {
    const { redis, keys } = internals(h.runtime);
    const fleet = webhookFleetKeys(keys);
    const body = JSON.stringify({ type: 'turn.ended', id: 'msg_dash1', sessionId: 'dash-dead', turn: 1, at: '' });
    const letter = { seq: 41, deadAt: '2026-12-01T10:00:00.000Z', sessionId: 'dash-dead', id: 'msg_dash1' };
    await redis.lpush(
      fleet.dead,
      JSON.stringify({ ...letter, type: 'turn.ended', attempts: 12, lastError: 'HTTP 503', body }),
    );
    await page.goto(`${server.url}/webhooks`);
    const row = page.getByTestId('dead-letter');
    await eventually(() => row.count()).toBe(1);
    expect(await row.getAttribute('data-seq')).toBe('41');
    expect(await row.textContent()).toContain('HTTP 503');
    expect(await page.getByTestId('webhooks-pending').textContent()).toBe('No events waiting for delivery.');
    await row.getByTestId('replay-from').click();
    await eventually(() => page.getByTestId('webhooks-note').textContent()).toBe(
      '1 dead letter(s) queued for delivery again',
    );
    await eventually(() => page.getByTestId('no-dead-letters').isVisible()).toBe(true);
    await eventually(() => page.getByTestId('webhooks-pending').textContent()).toBe(
      '1 event(s) of 1 session(s) waiting for delivery.',
    );
    expect(await redis.hget(outboxKey(keys, 'dash-dead', 'outbox'), 'msg_dash1')).toBe(body);
    expect(pageErrors).toEqual([]);
  });
});
