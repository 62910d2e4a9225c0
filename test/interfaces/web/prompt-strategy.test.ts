import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import type { BrowserContext, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { clientOver } from '../../../src/api/bind.ts';
import { loadConfig } from '../../../src/config/config.ts';
import { startServer, type RunningServer } from '../../../src/interfaces/http/server.ts';
import { deploymentPolicy } from '../../../src/runtime/deployment-policy.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import type { WorkspaceConfig } from '../../../src/workspace/index.ts';
import { launchChromium } from '../../support/browser.ts';
import { piHostOptions, TEST_POLICY, turnEnded, until, useRuntimeSuite, type Harness } from '../../support/runtime.ts';
import { runModel } from '../../support/workspace-model.ts';
import { workspacesIn } from '../../workspace/support.ts';

/**
 * The session page's "Add a prompt" form, in Debian's chromium: its strategy menu lists the `whenBusy` strategies the
 * deployment offers (built ∩ the policy's list, from GET /api/deployment-policy), reads as "Roll back the running turn"
 * while a turn runs, and a rollback sent from it takes the running turn back (real pi, workspaces, one worker).
 */

const MODEL = 'prompt-strategy';
let h: Harness;
let server: RunningServer;
let strict: RunningServer;
let context: BrowserContext;
let page: Page;
let userDataDir: string;
let config: WorkspaceConfig;

async function serve(policy = TEST_POLICY): Promise<RunningServer> {
  return startServer({
    client: clientOver(new Runtime({ connect: h.connect, prefix: h.prefix, policy })),
    config: loadConfig({ prefix: h.prefix }, {}),
    logger: pino({ level: 'silent' }),
    port: 0,
  });
}

useRuntimeSuite(
  'prompt-strategy',
  {
    scripts: { [MODEL]: runModel() },
    cleanup: async () => {
      await context?.close();
      if (userDataDir !== undefined) rmSync(userDataDir, { recursive: true, force: true });
      await server?.close(1000);
      await strict?.close(1000);
    },
  },
  async (s) => {
    ({ h } = s);
    config = workspacesIn(s.tempDir('prompt-strategy'));
    await h.startWorker({ workspaces: config, agentOptions: { pi: piHostOptions(s.env, h.stateDir) } });
    server = await serve();
    strict = await serve(deploymentPolicy({ workspace: tmpdir(), policy: { whenBusy: ['enqueue', 'interrupt'] } }));
    userDataDir = mkdtempSync(join(tmpdir(), 'sessiond-chromium-'));
    context = await launchChromium(userDataDir);
    page = context.pages()[0] ?? (await context.newPage());
    page.setDefaultTimeout(30_000);
  },
);

const optionsOf = () =>
  page
    .getByTestId('prompt-when-busy')
    .evaluate((el) => [...(el as unknown as { options: Iterable<{ value: string }> }).options].map((o) => o.value));

describe('dashboard: the prompt form’s strategy menu', () => {
  it('lists what the deployment offers; a rollback sent from it while a turn runs takes that turn back', async () => {
    const { sessionId } = await h.runtime.enqueue({
      prompt: 'RUN: echo one > a.txt # web-one',
      options: { provider: 'fake', model: MODEL },
    });
    expect((await turnEnded(h.runtime, sessionId, 1)).state).toBe('completed');

    // A deployment whose policy allows enqueue and interrupt only: the menu lists those.
    await page.goto(`${strict.url}/sessions/${encodeURIComponent(sessionId)}`);
    await expect.poll(optionsOf, { timeout: 15_000 }).toEqual(['enqueue', 'interrupt']);

    // This one allows all: the menu lists every strategy this version carries out.
    await page.goto(`${server.url}/sessions/${encodeURIComponent(sessionId)}`);
    await expect.poll(optionsOf, { timeout: 15_000 }).toEqual(['enqueue', 'steer', 'interrupt', 'reject', 'rollback']);
    await page.getByTestId('prompt-when-busy').selectOption('rollback');
    // Nothing runs: the form reads as a plain prompt.
    await expect.poll(() => page.getByTestId('prompt-title').textContent()).toBe('Add a prompt');

    await h.runtime.enqueue({ sessionId, prompt: 'RUN: echo two > b.txt; sleep 1000 # web-two' });
    await until(async () => existsSync(join(config.root, sessionId, 'b.txt')), 60_000, 'turn 2’s tool to run');
    await expect.poll(() => page.getByTestId('prompt-title').textContent()).toBe('Roll back the running turn');
    await page.getByTestId('prompt-when-busy').selectOption('interrupt');
    expect(await page.getByTestId('prompt-title').textContent()).toBe('Interrupt the running turn');
    await page.getByTestId('prompt-when-busy').selectOption('rollback');
    await page.locator('[data-testid="prompt-form"] textarea').fill('RUN: ls > list.txt # web-three');
    await page.getByTestId('prompt-send').click();
    await expect
      .poll(() => page.locator('[data-testid="prompt-form"] .form-ok').textContent())
      .toBe('queued as turn 3');

    expect((await turnEnded(h.runtime, sessionId, 3)).state).toBe('completed');
    expect(existsSync(join(config.root, sessionId, 'b.txt'))).toBe(false);
    expect(readFileSync(join(config.root, sessionId, 'list.txt'), 'utf8').split('\n')).toContain('a.txt');
    const log = await h.runtime.readMessages(sessionId);
    expect(log.filter((m) => m.turn === 2 && m.type === 'terminal.cancelled').map((m) => m.content)).toEqual([
      { reason: 'interrupted' },
    ]);
    expect(log.filter((m) => m.type === 'workspace.undone').map((m) => m.content)).toEqual([
      { turn: 2, to: 1, snapshot: expect.any(String), rollback: true },
    ]);
    // The transcript says so.
    await expect
      .poll(() => page.getByTestId('undone').textContent(), { timeout: 15_000 })
      .toContain('turn 2 rolled back');
  }, 180_000);
});
