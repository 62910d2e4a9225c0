import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  checkTurn,
  PolicyError,
  PolicySchema,
  resolvePolicy,
  webhookIssue,
  type PermissionKnobs,
} from '../../src/policy/index.ts';

const KNOBS: Record<string, PermissionKnobs> = {
  ladderly: { ladder: { option: 'mode', steps: ['low', 'mid', 'high'], defaultStep: 'mid', defaultCeiling: 'mid' } },
  lister: {
    lists: [
      { option: 'tools', defaultAllowed: '*', absentMeansAll: true },
      { option: 'grants', defaultAllowed: [], absentMeansAll: false },
    ],
    switches: [{ option: 'plugins', description: 'loads code' }],
  },
};
const root = mkdtempSync(join(tmpdir(), 'sessiond-policy-'));
mkdirSync(join(root, 'ws', 'a'), { recursive: true });
symlinkSync(join(root, 'ws', 'a'), join(root, 'inside-link'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const policy = (input: Record<string, unknown> = {}) =>
  resolvePolicy(PolicySchema.parse(input), KNOBS, join(root, 'ws'));

describe('resolvePolicy', () => {
  it('fills in the defaults: every agent, the workspace as the only root, no agentDir roots, each ladder at its default ceiling', () => {
    const p = policy();
    expect(p).toMatchObject({
      agents: ['ladderly', 'lister'],
      workspace: join(root, 'ws'),
      workspaceRoots: [join(root, 'ws')],
      agentDirRoots: [],
      maxIdleTimeoutMs: 3_600_000,
      maxPromptChars: 200_000,
    });
    expect(p.permissions.ladderly?.ladder?.ceiling).toBe('mid');
    expect(p.permissions.lister?.switches).toEqual([{ option: 'plugins', description: 'loads code', enabled: false }]);
  });

  it('names every bad field: an unknown agent, a ceiling not on the ladder, a list or switch the agent does not have', () => {
    const bad = () =>
      policy({
        agents: ['ladderly', 'lister', 'nobody'],
        permissions: { ladderly: { ceiling: 'top', allow: { tools: ['x'] } }, lister: { enable: ['nope'] }, ghost: {} },
      });
    expect(bad).toThrow(PolicyError);
    expect(bad).toThrow(/policy.agents.2: unknown agent "nobody"/);
    expect(bad).toThrow(/policy.permissions.ghost: unknown agent/);
    expect(bad).toThrow(/policy.permissions.ladderly.ceiling: must be one of low < mid < high \(got "top"\)/);
    expect(bad).toThrow(/policy.permissions.ladderly.allow.tools: ladderly has no such list option/);
    expect(bad).toThrow(/policy.permissions.lister.enable: lister has no switch "nope"/);
  });
});

describe('checkTurn', () => {
  it('a session without a cwd runs in the workspace', async () => {
    expect(await checkTurn(policy(), 'ladderly', {})).toEqual({ ok: true, options: { cwd: join(root, 'ws') } });
  });

  it('a cwd through a symlink that stays inside a root is accepted; one that does not exist yet is judged by its existing parent', async () => {
    const p = policy({ workspaceRoots: [join(root, 'ws'), join(root, 'inside-link')] });
    expect((await checkTurn(p, 'ladderly', { cwd: join(root, 'inside-link') })).ok).toBe(true);
    expect((await checkTurn(p, 'ladderly', { cwd: join(root, 'ws', 'a', 'not-yet', 'deeper') })).ok).toBe(true);
    expect((await checkTurn(p, 'ladderly', { cwd: join(root, 'ws', '..', 'elsewhere') })).ok).toBe(false);
  });

  it('an agent default above a lowered ceiling is brought down to the ceiling', async () => {
    const result = await checkTurn(policy({ permissions: { ladderly: { ceiling: 'low' } } }), 'ladderly', {});
    expect(result).toMatchObject({ ok: true, options: { mode: 'low' } });
  });

  it('a restricted list applies itself when the caller names none (the agent would enable everything), not for a list of grants', async () => {
    const result = await checkTurn(policy({ permissions: { lister: { allow: { tools: ['read'] } } } }), 'lister', {});
    expect(result).toEqual({ ok: true, options: { cwd: join(root, 'ws'), tools: ['read'], plugins: false } });
  });

  it('a switch is off unless the policy enables it, and a caller can never set it', async () => {
    const enabled = await checkTurn(policy({ permissions: { lister: { enable: ['plugins'] } } }), 'lister', {});
    expect(enabled.ok && 'plugins' in enabled.options).toBe(false);
    expect(await checkTurn(policy(), 'lister', { plugins: true })).toEqual({
      ok: false,
      issues: [{ field: 'options.plugins', message: "is the deployment's to set, not a caller's" }],
    });
  });

  it('reports every refusal at once', async () => {
    const result = await checkTurn(policy({ maxPromptChars: 3 }), 'lister', { cwd: '/', grants: ['all'] }, 'long');
    expect(result.ok).toBe(false);
    expect(!result.ok && result.issues.map((i) => i.field)).toEqual(['prompt', 'options.cwd', 'options.grants.0']);
  });
});

describe('workspaces in the policy', () => {
  it('refuses a source repository the policy does not name, and accepts an exact one or one under a prefix', async () => {
    const none = await checkTurn(policy(), 'lister', { workspace: { repo: 'https://git.example.com/a.git' } });
    expect(none).toEqual({
      ok: false,
      issues: [
        {
          field: 'options.workspace.repo',
          message:
            '"https://git.example.com/a.git" is not a repository this deployment lets callers name (policy.workspaces.repos: none)',
        },
      ],
    });
    const p = policy({ workspaces: { repos: ['https://git.example.com/team/', '/srv/repo.git'] } });
    expect((await checkTurn(p, 'lister', { workspace: { repo: 'https://git.example.com/team/x.git' } })).ok).toBe(true);
    expect((await checkTurn(p, 'lister', { workspace: { repo: '/srv/repo.git' } })).ok).toBe(true);
    expect((await checkTurn(p, 'lister', { workspace: { repo: 'https://git.example.com/teams.git' } })).ok).toBe(false);
  });

  it('refuses a cwd together with a workspace, and any cwd when callerCwd is false', async () => {
    const p = policy({ workspaces: { repos: ['/srv/repo.git'], callerCwd: false } });
    const both = await checkTurn(p, 'lister', { cwd: join(root, 'ws', 'a'), workspace: { repo: '/srv/repo.git' } });
    expect(both.ok === false && both.issues.map((i) => i.field)).toEqual(['options.workspace', 'options.cwd']);
    const cwd = await checkTurn(p, 'lister', { cwd: join(root, 'ws', 'a') });
    expect(cwd).toEqual({
      ok: false,
      issues: [
        {
          field: 'options.cwd',
          message: 'callers may not name a cwd on this deployment (policy.workspaces.callerCwd is false)',
        },
      ],
    });
  });
});

describe('per-session webhooks in the policy', () => {
  const policy = (hosts: string[]) =>
    resolvePolicy(PolicySchema.parse({ webhooks: { hosts } }), KNOBS, '/srv/sessions');

  it('refuses every webhook by default, naming the field', () => {
    expect(webhookIssue(policy([]), 'https://hooks.example.com/x')).toEqual({
      field: 'webhook',
      message:
        'hooks.example.com:443 is not a host this deployment lets callers send webhooks to (policy.webhooks.hosts: none)',
    });
  });

  it('takes a listed host on 443 and 80, a subdomain of a wildcard, a host:port only on that port', () => {
    const p = policy(['hooks.example.com', '*.example.net', '127.0.0.1:8080']);
    for (const ok of [
      'https://hooks.example.com/a',
      'http://HOOKS.example.com/a?b=c',
      'https://a.b.example.net/',
      'http://127.0.0.1:8080/hook',
    ])
      expect(webhookIssue(p, ok)).toBeNull();
    for (const refused of [
      'https://hooks.example.com:8443/a',
      'https://example.net/',
      'https://hooks.example.com.evil.io/',
      'http://127.0.0.1/hook',
      'http://127.0.0.1:8081/hook',
    ])
      expect(webhookIssue(p, refused)?.field).toBe('webhook');
  });

  it('refuses what is not an http(s) URL, and credentials in it', () => {
    const p = policy(['hooks.example.com']);
    expect(webhookIssue(p, 'hooks.example.com/x')?.message).toBe('must be an http:// or https:// URL');
    expect(webhookIssue(p, 'ftp://hooks.example.com/x')?.message).toBe('must be an http:// or https:// URL');
    expect(webhookIssue(p, 'https://user:pw@hooks.example.com/x')?.message).toBe(
      'must not carry a user name or password',
    );
  });

  it('refuses a malformed host pattern in the policy, naming the field', () => {
    const parsed = PolicySchema.safeParse({ webhooks: { hosts: ['https://hooks.example.com/'] } });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues[0]?.path).toEqual(['webhooks', 'hosts', 0]);
  });
});
