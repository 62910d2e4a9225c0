import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import type { BrowserContext, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { launchChromium } from '../../support/browser.ts';
import { loadConfig } from '../../../src/config/config.ts';
import { startServer, type RunningServer } from '../../../src/interfaces/http/server.ts';
import { deploymentPolicy } from '../../../src/runtime/deployment-policy.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import { assistantText, turnEnded, until, useRuntimeSuite } from '../../support/runtime.ts';
import { clientOver } from '../../../src/api/bind.ts';

/** The dashboard's approval panel, in Debian's chromium: an agent's permission request is shown awaiting approval, in the list too; Allow gives it to the agent. */

const FAKE = fileURLToPath(new URL('../../fixtures/acp/fake-acp-agent.mjs', import.meta.url));
const state = mkdtempSync(join(tmpdir(), 'sessiond-approval-buttons-'));
const OPERATOR = { 'acp:fake': { command: process.execPath, args: [FAKE], env: { FAKE_ACP_STATE_DIR: state } } };
const policy = deploymentPolicy({
  workspace: tmpdir(),
  agents: OPERATOR,
  policy: { permissions: { 'acp:fake': { ceiling: 'ask' } } },
});

let runtime: Runtime;
let server: RunningServer;
let context: BrowserContext;
let page: Page;
let userDataDir: string;

useRuntimeSuite(
  'approval-buttons',
  {
    cleanup: async () => {
      await context?.close();
      if (userDataDir !== undefined) rmSync(userDataDir, { recursive: true, force: true });
      await server?.close(1000);
      await runtime?.close();
      rmSync(state, { recursive: true, force: true });
    },
  },
  async (s) => {
    runtime = new Runtime({ connect: s.h.connect, prefix: s.h.prefix, policy });
    await s.h.startWorker({ agentOptions: OPERATOR, policy });
    server = await startServer({
      client: clientOver(runtime),
      config: loadConfig({ prefix: s.h.prefix }, {}),
      logger: pino({ level: 'silent' }),
      port: 0,
    });
    userDataDir = mkdtempSync(join(tmpdir(), 'sessiond-chromium-'));
    context = await launchChromium(userDataDir);
    page = context.pages()[0] ?? (await context.newPage());
    page.setDefaultTimeout(30_000);
  },
);

describe('dashboard: approvals', () => {
  it('a waiting request is marked in the list and shown on the session page; Allow once gives it to the agent', async () => {
    const { sessionId } = await runtime.enqueue({
      prompt: 'ask',
      options: { agent: 'acp:fake', permissionMode: 'ask' },
    });
    await until(
      async () => (await runtime.readMessages(sessionId)).some((m) => m.type === 'approval.requested'),
      30_000,
      'approval.requested',
    );
    await page.goto(`${server.url}/`);
    await expect
      .poll(() => page.locator(`tr[data-session-id="${sessionId}"] [data-testid="awaiting-approval"]`).count(), {
        timeout: 15_000,
      })
      .toBe(1);

    await page.goto(`${server.url}/sessions/${encodeURIComponent(sessionId)}`);
    const approval = page.getByTestId('approval');
    await expect.poll(() => approval.count(), { timeout: 15_000 }).toBe(1);
    expect(await approval.textContent()).toContain('rm -rf build');
    await page.getByTestId('approve').click();
    expect((await turnEnded(runtime, sessionId)).state).toBe('completed');
    const messages = await runtime.readMessages(sessionId);
    expect(assistantText(messages)).toBe('permission: yes');
    expect(messages.filter((m) => m.type === 'approval.decided').map((m) => m.content)).toEqual([
      expect.objectContaining({ outcome: 'allowed', optionId: 'yes', by: 'http:open' }),
    ]);
    await expect.poll(() => page.getByTestId('approval').count(), { timeout: 15_000 }).toBe(0);
    await expect.poll(() => page.getByTestId('approval-decided').count(), { timeout: 15_000 }).toBe(1);
  }, 90_000);
});
