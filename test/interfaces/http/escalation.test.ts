import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/config.ts';
import { createApp } from '../../../src/interfaces/http/app.ts';
import { deploymentPolicy } from '../../../src/runtime/deployment-policy.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import { runCli } from '../../support/cli.ts';
import { startRedis, uniquePrefix, type RedisServer } from '../../support/redis.ts';
import { connector } from '../../support/runtime.ts';
import { internals } from '../../../src/runtime/internals.ts';
import { clientOver } from '../../../src/api/bind.ts';

/**
 * Callers choose less than the operator: every escalation a caller can try through the HTTP API
 * and the CLI is refused with a 400 (CLI: exit 2) naming the field and the rule, and nothing is
 * written to Redis.
 */

let redis: RedisServer;
let runtime: Runtime;
let app: ReturnType<typeof createApp>;
let closeAll: () => void;
let prefix: string;
let root: string;
let workspace: string;

const POLICY = (ws: string) => ({
  agents: ['pi', 'claude-code', 'codex', 'gemini'],
  workspaceRoots: [ws],
  maxIdleTimeoutMs: 600_000,
  maxPromptChars: 1000,
  permissions: { pi: { allow: { tools: ['read', 'bash'] } } },
});

beforeAll(async () => {
  redis = await startRedis();
  root = mkdtempSync(join(tmpdir(), 'sessiond-escalation-'));
  workspace = join(root, 'workspace');
  mkdirSync(join(workspace, 'project'), { recursive: true });
  // A symlink inside the root that leads out of it.
  symlinkSync('/etc', join(workspace, 'escape'));
  const c = connector(redis.url);
  closeAll = c.closeAll;
  prefix = uniquePrefix('escalation');
  runtime = new Runtime({
    connect: c.connect,
    prefix,
    policy: deploymentPolicy({ policy: POLICY(workspace), workspace }),
  });
  await internals(runtime).queue.queue.waitUntilReady();
  await internals(runtime).queue.queue.getJobCounts();
  app = createApp({
    client: clientOver(runtime),
    config: loadConfig({ prefix }, {}),
    logger: pino({ level: 'silent' }),
  });
});

afterAll(async () => {
  await runtime.close();
  closeAll();
  await redis.stop();
  rmSync(root, { recursive: true, force: true });
});

async function keys(): Promise<string[]> {
  return (await internals(runtime).redis.keys('*')).sort();
}

function post(body: unknown) {
  return app.request('http://127.0.0.1/api/sessions', {
    method: 'POST',
    headers: { 'content-type': 'application/json', host: '127.0.0.1' },
    body: JSON.stringify(body),
  });
}

interface Attempt {
  name: string;
  options?: Record<string, unknown>;
  prompt?: string;
  field: string;
  rule: RegExp;
}

const ATTEMPTS = (): Attempt[] => [
  {
    name: 'Claude Code bypassPermissions',
    options: { agent: 'claude-code', permissionMode: 'bypassPermissions' },
    field: 'options.permissionMode',
    rule: /"bypassPermissions" is above this deployment's ceiling "acceptEdits"/,
  },
  {
    name: 'Claude Code pre-approved tools',
    options: { agent: 'claude-code', allowedTools: ['Bash'] },
    field: 'options.allowedTools.0',
    rule: /"Bash" is not allowed on this deployment \(allowed: none\)/,
  },
  {
    name: 'Codex danger-full-access',
    options: { agent: 'codex', sandbox: 'danger-full-access' },
    field: 'options.sandbox',
    rule: /"danger-full-access" is above this deployment's ceiling "workspace-write"/,
  },
  {
    name: 'Gemini yolo',
    options: { agent: 'gemini', approvalMode: 'yolo' },
    field: 'options.approvalMode',
    rule: /"yolo" is above this deployment's ceiling "auto_edit"/,
  },
  {
    name: 'pi tools beyond the allowed set',
    options: { tools: ['read', 'write'] },
    field: 'options.tools.1',
    rule: /"write" is not allowed on this deployment \(allowed: read, bash\)/,
  },
  { name: 'pi extensions turned on by a caller', options: { extensions: true }, field: 'options', rule: /extensions/ },
  {
    name: 'cwd outside the roots',
    options: { cwd: '/' },
    field: 'options.cwd',
    rule: /"\/" is outside this deployment's allowed roots \(policy.workspaceRoots/,
  },
  {
    name: 'cwd through a symlink out of the root',
    options: { cwd: '__ESCAPE__' },
    field: 'options.cwd',
    rule: /resolves to \/etc\) is outside this deployment's allowed roots/,
  },
  { name: 'a relative cwd', options: { cwd: 'project' }, field: 'options.cwd', rule: /must be an absolute path/ },
  {
    name: 'agentDir',
    options: { agentDir: '/etc' },
    field: 'options.agentDir',
    rule: /callers may not choose an agent dir on this deployment/,
  },
  {
    name: 'a huge idle timeout',
    options: { idleTimeoutMs: 86_400_000 },
    field: 'options.idleTimeoutMs',
    rule: /86400000 is above this deployment's maximum of 600000/,
  },
  { name: 'an agent not allowed', options: { agent: 'acme' }, field: 'options.agent', rule: /must be one of/ },
  { name: 'the agent executable', options: { command: '/bin/sh' }, field: 'options', rule: /command/ },
  { name: 'the agent env', options: { env: { LD_PRELOAD: '/tmp/x.so' } }, field: 'options', rule: /env/ },
  { name: 'extra argv', options: { extraArgs: ['--extension', '/tmp/x.js'] }, field: 'options', rule: /extraArgs/ },
  {
    name: 'a prompt over the maximum',
    prompt: 'x'.repeat(1001),
    field: 'prompt',
    rule: /1001 characters is above this deployment's maximum of 1000/,
  },
];

const withEscape = (options: Record<string, unknown> | undefined): Record<string, unknown> | undefined =>
  options === undefined
    ? undefined
    : Object.fromEntries(
        Object.entries(options).map(([k, v]) => [k, v === '__ESCAPE__' ? join(workspace, 'escape') : v]),
      );

describe('escalation through the HTTP API', () => {
  for (const attempt of ATTEMPTS()) {
    it(`refuses ${attempt.name} with a 400 naming ${attempt.field}, and writes nothing`, async () => {
      const before = await keys();
      const options = withEscape(attempt.options);
      const response = await post({ prompt: attempt.prompt ?? 'hello', ...(options === undefined ? {} : { options }) });
      expect(response.status).toBe(400);
      const body = (await response.json()) as { issues: Array<{ field: string; message: string }> };
      const issue = body.issues.find((i) => i.field === attempt.field);
      expect(issue, JSON.stringify(body.issues)).toBeDefined();
      expect(issue?.message).toMatch(attempt.rule);
      expect(await keys()).toEqual(before);
    });
  }

  it('a request within every ceiling is accepted: a cwd inside the root, Codex workspace-write, pi tools of the allowed set', async () => {
    for (const options of [
      { cwd: join(workspace, 'project') },
      { agent: 'codex', sandbox: 'workspace-write' },
      { tools: ['read'] },
    ]) {
      expect((await post({ prompt: 'hello', options })).status).toBe(201);
    }
  });

  it('an agent the policy leaves out is refused with the agents it allows', async () => {
    const narrow = new Runtime({
      connect: connector(redis.url).connect,
      prefix: uniquePrefix('narrow'),
      policy: deploymentPolicy({ policy: { agents: ['pi'] }, workspace }),
    });
    try {
      await expect(narrow.enqueue({ prompt: 'hi', options: { agent: 'codex' } })).rejects.toThrow(
        /options.agent: "codex" is not an agent this deployment lets callers choose \(allowed: pi\)/,
      );
    } finally {
      await narrow.close();
    }
  });

  it('GET /api/deployment-policy shows callers what is allowed', async () => {
    const response = await app.request('http://127.0.0.1/api/deployment-policy', { headers: { host: '127.0.0.1' } });
    expect(response.status).toBe(200);
    const policy = (await response.json()) as Record<string, unknown>;
    expect(policy).toMatchObject({
      workspaceRoots: [workspace],
      agentDirRoots: [],
      maxIdleTimeoutMs: 600_000,
      maxPromptChars: 1000,
      // Every strategy the policy allows (all) that this version carries out.
      whenBusyOffered: ['enqueue', 'steer', 'interrupt', 'reject', 'rollback'],
    });
    expect(policy.permissions).toMatchObject({
      codex: { ladder: { option: 'sandbox', ceiling: 'workspace-write' } },
      pi: { switches: [{ option: 'extensions', enabled: false }] },
    });
  });
});

describe('escalation through the CLI', () => {
  const cliEnv = () => ({
    PATH: process.env.PATH ?? '',
    HOME: root,
    REDIS_URL: redis.url,
    SESSIOND_PREFIX: prefix,
    SESSIOND_STATE_DIR: join(root, 'state'),
    SESSIOND_POLICY: JSON.stringify(POLICY(workspace)),
    SESSIOND_LOG_LEVEL: 'warn',
  });
  const cases: Array<{ args: string[]; message: RegExp }> = [
    {
      args: ['--agent', 'codex', '--agent-option', 'sandbox=danger-full-access'],
      message: /options.sandbox: "danger-full-access" is above this deployment's ceiling "workspace-write"/,
    },
    {
      args: ['--agent', 'gemini', '--agent-option', 'approvalMode=yolo'],
      message: /options.approvalMode: "yolo" is above this deployment's ceiling "auto_edit"/,
    },
    { args: ['--cwd', '/'], message: /options.cwd: "\/" is outside this deployment's allowed roots/ },
    { args: ['--agent-dir', '/etc'], message: /options.agentDir: callers may not choose an agent dir/ },
    { args: ['--idle-timeout', '24h'], message: /options.idleTimeoutMs: 86400000 is above this deployment's maximum/ },
  ];
  for (const { args, message } of cases) {
    it(`enqueue ${args.join(' ')} exits 2 naming the field and the rule, and writes nothing`, async () => {
      const before = await keys();
      const result = await runCli(['enqueue', ...args, 'hello'], { env: cliEnv() });
      expect(result.exitCode).toBe(2);
      expect(result.stderr).toMatch(message);
      expect(await keys()).toEqual(before);
    });
  }

  it('policy show prints the policy in force, and an invalid policy exits 2 naming the field', async () => {
    const shown = await runCli(['policy', 'show', '--json'], { env: cliEnv() });
    expect(shown.exitCode).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({ workspaceRoots: [workspace], maxPromptChars: 1000 });
    const bad = await runCli(['policy', 'show'], {
      env: { ...cliEnv(), SESSIOND_POLICY: JSON.stringify({ permissions: { codex: { ceiling: 'root' } } }) },
    });
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr).toMatch(
      /policy.permissions.codex.ceiling: must be one of read-only < workspace-write < danger-full-access \(got "root"\)/,
    );
  });
});
