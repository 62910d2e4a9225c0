import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../../support/cli.ts';

/** `sessiond agents`: every agent this host can run, with its CLI version (asked with --version), resume and permission knob. */
const home = mkdtempSync(join(tmpdir(), 'sessiond-agents-'));
afterAll(() => rmSync(home, { recursive: true, force: true }));

const OPERATOR = {
  'acp:gemini': { command: 'gemini', args: ['--acp'] },
  'acp:qwen': { command: 'qwen', args: ['--acp'] },
  'acp:opencode': { command: 'opencode', args: ['acp'] },
  'acp:claude': { command: 'claude-agent-acp' },
  'acp:missing': { command: '/nonexistent/acp-agent' },
};

// `--version` of nine CLIs and `initialize` of four, one after another: seconds each on a loaded host (a budget, not a timing assertion).
describe('sessiond agents', { timeout: 420_000 }, () => {
  it('lists the four registry agents and the configured acp:<name> agents (eight on real CLIs) with their versions, how each resumes (an ACP agent: from its initialize) and permission knob', async () => {
    const result = await runCli(['agents', '--json'], {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: home,
        SESSIOND_AGENT_OPTIONS: JSON.stringify(OPERATOR),
        SESSIOND_STATE_DIR: join(home, 'state'),
      },
    });
    expect(result.exitCode, result.stderr).toBe(0);
    const rows = JSON.parse(result.stdout) as Array<{
      name: string;
      command: string;
      version: string | null;
      installed: boolean;
      resume: string;
      permissions: string;
    }>;
    const byName = Object.fromEntries(rows.map((r) => [r.name, r]));
    expect(rows.map((r) => r.name)).toEqual([
      'claude-code',
      'gemini',
      'codex',
      'pi',
      'acp:claude',
      'acp:gemini',
      'acp:missing',
      'acp:opencode',
      'acp:qwen',
    ]);
    // The pinned CLIs of agent-clis/ (scripts/install-agent-clis.sh).
    expect(byName.gemini?.version).toBe('0.61.0');
    expect(byName['claude-code']?.version).toBe('2.1.332 (Claude Code)');
    expect(byName.codex?.version).toBe('codex-cli 0.171.0');
    expect(byName['acp:gemini']?.version).toBe('0.61.0');
    expect(byName['acp:qwen']?.version).toBe('0.24.4');
    expect(byName['acp:opencode']?.version).toBe('1.18.33');
    expect(byName['acp:claude']?.version).toBe('0.101.0');
    expect(byName['acp:missing']?.version).toBeNull();
    expect(byName['acp:missing']?.installed).toBe(false);
    // pi prints its version on stderr.
    expect(byName.pi).toMatchObject({ version: '0.73.1', installed: true });
    expect(rows.filter((r) => !r.installed).map((r) => r.name)).toEqual(['acp:missing']);
    expect(byName['acp:qwen']?.permissions).toBe(
      'permissionMode: reject < ask < allow (default reject, ceiling reject unless the policy says)',
    );
    expect(byName.codex?.permissions).toContain('sandbox:');
    // Each ACP agent's own answer to initialize: gemini 0.61 loads, the other three resume.
    expect(byName['acp:gemini']?.resume).toMatch(/^yes: session\/load\b/);
    for (const name of ['acp:qwen', 'acp:opencode', 'acp:claude'])
      expect(byName[name]?.resume, name).toMatch(/^yes: session\/resume\b/);
    expect(byName['acp:missing']?.resume).toBe('unknown: the agent did not answer initialize');
    expect(byName.pi?.resume).toContain('any host');
  });

  it('prints a readable listing without --json', async () => {
    const result = await runCli(['agents'], {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: home,
        SESSIOND_AGENT_OPTIONS: JSON.stringify({
          'acp:qwen': OPERATOR['acp:qwen'],
          'acp:missing': OPERATOR['acp:missing'],
        }),
      },
    });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(result.stdout).toContain('acp:qwen\n  command: qwen\n  version: 0.24.4\n');
    expect(result.stdout).toContain('pi\n  command: pi\n  version: 0.73.1\n');
    expect(result.stdout).toContain(
      'acp:missing\n  command: /nonexistent/acp-agent\n  version: not installed (no /nonexistent/acp-agent here)\n',
    );
  });
});
