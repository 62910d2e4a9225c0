import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import type { BrowserContext, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { launchChromium } from '../../support/browser.ts';
import { loadConfig } from '../../../src/config/config.ts';
import { startServer, type RunningServer } from '../../../src/interfaces/http/server.ts';
import { piHostOptions, TEST_POLICY, turnEnded, until, useRuntimeSuite, type Harness } from '../../support/runtime.ts';
import { runModel } from '../../support/workspace-model.ts';
import { internals } from '../../../src/runtime/internals.ts';
import { clientOver } from '../../../src/api/bind.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import type { WorkspaceConfig } from '../../../src/workspace/index.ts';
import { workspacesIn } from '../../workspace/support.ts';

/**
 * The dashboard's workspace panel, in Debian's chromium, on a workspace session of real pi: each turn's diff,
 * Undo of the last turn, Fork at the turn shown; hidden for a session without a workspace.
 */

const MODEL = 'ws-buttons';
let h: Harness;
let server: RunningServer;
let context: BrowserContext;
let page: Page;
let userDataDir: string;
let config: WorkspaceConfig;
let cwdDir: string;

useRuntimeSuite(
  'workspace-buttons',
  {
    scripts: { [MODEL]: runModel() },
    cleanup: async () => {
      await context?.close();
      if (userDataDir !== undefined) rmSync(userDataDir, { recursive: true, force: true });
      await server?.close(1000);
    },
  },
  async (s) => {
    ({ h } = s);
    const dir = s.tempDir('ws-buttons');
    cwdDir = s.tempDir('ws-buttons-cwd');
    config = workspacesIn(dir);
    await h.startWorker({ workspaces: config, agentOptions: { pi: piHostOptions(s.env, h.stateDir) } });
    const runtime = new Runtime({
      connect: h.connect,
      prefix: h.prefix,
      policy: TEST_POLICY,
      workspaces: { ...config, gitDir: join(dir, 'server-git') },
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

async function settled(sessionId: string): Promise<void> {
  const keys = internals(h.runtime).keys;
  const redis = h.connect('t');
  await until(
    async () =>
      (await redis.exists(keys.session(sessionId, 'lease'), keys.session(sessionId, 'active'))) === 0 ? true : null,
    15_000,
    'the session to settle',
  );
}

describe('dashboard: the workspace panel', () => {
  it('shows each turn’s diff; Undo takes the last turn back; Fork opens the new session', async () => {
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'RUN: echo one > a.txt',
      options: { provider: 'fake', model: MODEL },
    });
    expect((await turnEnded(h.runtime, sessionId, 1)).state).toBe('completed');
    await h.runtime.enqueue({ sessionId, prompt: 'RUN: echo two > b.txt' });
    expect((await turnEnded(h.runtime, sessionId, 2)).state).toBe('completed');
    await settled(sessionId);

    await page.goto(`${server.url}/sessions/${encodeURIComponent(sessionId)}`);
    await expect.poll(() => page.getByTestId('diff').textContent(), { timeout: 15_000 }).toContain('+++ b/b.txt');
    await page.getByTestId('diff-turn').selectOption('1');
    await expect.poll(() => page.getByTestId('diff').textContent()).toContain('+++ b/a.txt');
    await page.getByTestId('diff-stat').check();
    await expect.poll(() => page.getByTestId('diff').textContent()).toMatch(/a\.txt \| 1 \+/);
    await page.getByTestId('diff-stat').uncheck();

    await page.getByTestId('undo').click();
    await expect.poll(() => page.getByTestId('workspace-note').textContent()).toContain('turn 2 undone');
    await expect.poll(() => page.getByTestId('undone').count(), { timeout: 10_000 }).toBe(1);
    const messages = await h.runtime.readMessages(sessionId);
    expect(messages.at(-1)?.type).toBe('workspace.undone');

    const copy = `${sessionId}-web`;
    await page.getByTestId('diff-turn').selectOption('1');
    await page.getByTestId('fork-as').fill(copy);
    await page.getByTestId('fork').click();
    await page.waitForURL(`${server.url}/sessions/${encodeURIComponent(copy)}`);
    expect((await h.runtime.getSession(copy))?.sessionId).toBe(copy);
    await h.runtime.enqueue({ sessionId: copy, prompt: 'RUN: ls > list.txt' });
    expect((await turnEnded(h.runtime, copy, 3)).state).toBe('completed');
    expect(readFileSync(join(config.root, copy, 'list.txt'), 'utf8').split('\n')).toContain('a.txt');
  }, 120_000);

  it('is hidden for a session without a workspace', async () => {
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'Hello',
      options: { provider: 'fake', model: MODEL, cwd: cwdDir },
    });
    expect((await turnEnded(h.runtime, sessionId, 1)).state).toBe('completed');
    await settled(sessionId);
    // The panel asks for the last turn's diff once the session is settled: refused, "has no workspace".
    const asked = page.waitForResponse((r) => r.url().includes(`/api/sessions/${sessionId}/diff`));
    await page.goto(`${server.url}/sessions/${encodeURIComponent(sessionId)}`);
    const answer = await asked;
    expect(answer.status()).toBe(409);
    expect(((await answer.json()) as { error: string }).error).toMatch(/has no workspace/);
    await expect.poll(() => page.getByTestId('session-state').textContent()).toBe('completed');
    expect(await page.getByTestId('workspace').isHidden()).toBe(true);
  }, 60_000);
});
