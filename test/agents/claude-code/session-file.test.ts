import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  claudeConfigDir,
  claudeStateAfterTool,
  exportClaudeSession,
  importClaudeSession,
  parseClaudeSessionState,
  projectDirName,
} from '../../../src/agents/claude-code/session-file.ts';
import { claudeCode } from '../../../src/agents/claude-code/definition.ts';

const ID = '0e753451-2f7e-4269-b6f0-68fac1eae933';
const dirs: string[] = [];
const tempDir = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'claude-session-'));
  dirs.push(dir);
  return dir;
};

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function writeSession(configDir: string, project: string, content: string): void {
  mkdirSync(join(configDir, 'projects', project), { recursive: true });
  writeFileSync(join(configDir, 'projects', project, `${ID}.jsonl`), content);
}

describe('Claude Code session files', () => {
  it('the config dir is configDir, else CLAUDE_CONFIG_DIR (options.env, then sessiond), else HOME/.claude', () => {
    expect(claudeConfigDir({ configDir: '/a' }, {})).toBe('/a');
    expect(claudeConfigDir({ env: { CLAUDE_CONFIG_DIR: '/b' } }, { CLAUDE_CONFIG_DIR: '/c' })).toBe('/b');
    expect(claudeConfigDir({}, { CLAUDE_CONFIG_DIR: '/c' })).toBe('/c');
    expect(claudeConfigDir({ env: { HOME: '/h' } }, { HOME: '/other' })).toBe('/h/.claude');
  });

  it('names project dirs like Claude Code: every non-alphanumeric becomes "-"', () => {
    expect(projectDirName('/tmp/cc-exp/r-aobHXo/work')).toBe('-tmp-cc-exp-r-aobHXo-work');
  });

  it('exports a session found under any project dir and imports it on another host under its cwd', async () => {
    const host1 = tempDir();
    writeSession(host1, '-w1', 'line1\nline2\n');
    const state = await exportClaudeSession(host1, ID);
    expect(state).toEqual({ version: 1, projectDir: '-w1', content: 'line1\nline2\n' });
    const host2 = tempDir();
    await importClaudeSession(host2, ID, parseClaudeSessionState(JSON.stringify(state)), '/srv/work');
    expect(readFileSync(join(host2, 'projects', '-srv-work', `${ID}.jsonl`), 'utf8')).toBe('line1\nline2\n');
  });

  it('keeps a local copy that is the same or further along, and replaces one that is behind', async () => {
    const host = tempDir();
    writeSession(host, '-w1', 'line1\nline2\nline3\n');
    await importClaudeSession(host, ID, { version: 1, projectDir: '-w1', content: 'line1\n' }, '/elsewhere');
    expect(readFileSync(join(host, 'projects', '-w1', `${ID}.jsonl`), 'utf8')).toBe('line1\nline2\nline3\n');
    expect(readdirSync(join(host, 'projects'))).toEqual(['-w1']);
    await importClaudeSession(host, ID, { version: 1, projectDir: '-w1', content: 'line1\nline2\nline3\nline4\n' });
    expect(readFileSync(join(host, 'projects', '-w1', `${ID}.jsonl`), 'utf8')).toBe('line1\nline2\nline3\nline4\n');
  });

  it('exact (a workspace going back to its recorded point): the stored state replaces a local copy further along', async () => {
    const host = tempDir();
    writeSession(host, '-w1', 'line1\nline2\ncancelled tool call\n');
    const stored = JSON.stringify({ version: 1, projectDir: '-w1', content: 'line1\nline2\n' });
    await claudeCode.importState?.({ configDir: host, cwd: '/elsewhere' }, ID, stored, { exact: true });
    expect(readFileSync(join(host, 'projects', '-w1', `${ID}.jsonl`), 'utf8')).toBe('line1\nline2\n');
    expect(readdirSync(join(host, 'projects'))).toEqual(['-w1']);
  });

  it("cuts the session file just after the line holding a tool call's result; later: a tool call follows", () => {
    const line = (entry: unknown): string => `${JSON.stringify(entry)}\n`;
    const toolUse = (id: string) =>
      line({ type: 'assistant', message: { role: 'assistant', content: [{ type: 'tool_use', id, name: 'Bash' }] } });
    const result = (id: string) =>
      line({
        type: 'user',
        message: { role: 'user', content: [{ tool_use_id: id, type: 'tool_result', content: 'ok' }] },
      });
    const head = line({ type: 'user', message: { role: 'user', content: 'run two commands' } }) + toolUse('toolu_1');
    const content = `${head}${result('toolu_1')}${toolUse('toolu_2')}`;
    const state = { version: 1 as const, projectDir: '-w1', content };
    expect(claudeStateAfterTool(state, 'toolu_1')).toEqual({
      state: { ...state, content: `${head}${result('toolu_1')}` },
      later: true,
    });
    // No result yet; a result on a torn last line (being written) is none either.
    expect(claudeStateAfterTool(state, 'toolu_2')).toBeNull();
    expect(
      claudeStateAfterTool({ ...state, content: `${content}${result('toolu_2').trimEnd()}` }, 'toolu_2'),
    ).toBeNull();
    // The call's id in an assistant line or a text is not its result.
    expect(
      claudeStateAfterTool(
        { ...state, content: `${head}${line({ type: 'user', message: { content: 'toolu_1' } })}` },
        'toolu_1',
      ),
    ).toBeNull();
    const whole = `${content}${result('toolu_2')}`;
    const cut = claudeCode.stateAfterTool?.(JSON.stringify({ ...state, content: whole }), 'toolu_2', {
      toolCallsEnded: 2,
    });
    expect(cut).toEqual({ state: JSON.stringify({ ...state, content: whole }), later: false });
  });

  it('exports nothing for an unknown session or a malformed id, and refuses states it does not know', async () => {
    const host = tempDir();
    expect(await exportClaudeSession(host, ID)).toBeNull();
    expect(await exportClaudeSession(host, '../../etc/passwd')).toBeNull();
    expect(() => parseClaudeSessionState('{"version":99,"content":""}')).toThrow(/version 99/);
    await expect(importClaudeSession(host, ID, { version: 1, projectDir: '..', content: '' })).rejects.toThrow();
    await expect(importClaudeSession(host, '../x', { version: 1, projectDir: 'p', content: '' })).rejects.toThrow();
  });
});
