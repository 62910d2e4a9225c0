import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { codex } from '../../../src/agents/codex/definition.ts';
import { managedCodexHomePath, prepareManagedCodexHome, userCodexHome } from '../../../src/agents/codex/home.ts';
import { exportCodexRollout, importCodexRollout } from '../../../src/agents/codex/session-file.ts';

const THREAD = '01a22958-c3ff-74e2-a8e3-aae33327962b';
const ROLLOUT = `2026/11/29/rollout-2026-11-29T21-54-02-${THREAD}.jsonl`;

let root: string;
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'codex-home-test-'));
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(dir, { recursive: true }) as string[]) {
    const path = join(dir, name);
    out[name] = statSync(path).isDirectory() ? '<dir>' : readFileSync(path, 'utf8');
  }
  return out;
}

describe('the managed CODEX_HOME', () => {
  it("carries the user's config.toml (copied) and auth.json (linked), and writes nothing in the user's CODEX_HOME", async () => {
    const user = join(root, 'user');
    mkdirSync(join(user, 'sessions'), { recursive: true });
    writeFileSync(join(user, 'config.toml'), 'model = "gpt-5.5"\n[model_providers.mine]\nrequest_max_retries = 4\n');
    writeFileSync(join(user, 'auth.json'), '{"OPENAI_API_KEY":"k"}');
    const before = snapshot(user);
    const home = await prepareManagedCodexHome(user, join(root, 'state'));
    expect(home.userConfig).toBe(before['config.toml']);
    expect(readFileSync(join(home.path, 'config.toml'), 'utf8')).toBe(before['config.toml']);
    expect(lstatSync(join(home.path, 'auth.json')).isSymbolicLink()).toBe(true);
    expect(readlinkSync(join(home.path, 'auth.json'))).toBe(join(user, 'auth.json'));
    // The user's threads stay the user's: sessiond's threads live in the managed home.
    expect(() => lstatSync(join(home.path, 'sessions'))).toThrow();
    expect(snapshot(user)).toEqual(before);
  });

  it('is refreshed when the user edits config.toml, and works without one', async () => {
    const user = join(root, 'user');
    mkdirSync(user);
    const first = await prepareManagedCodexHome(user, join(root, 'state'));
    expect(first.userConfig).toBeNull();
    expect(readFileSync(join(first.path, 'config.toml'), 'utf8')).toBe('');
    writeFileSync(join(user, 'config.toml'), 'model = "o3"\n');
    const second = await prepareManagedCodexHome(user, join(root, 'state'));
    expect(second.path).toBe(first.path);
    expect(readFileSync(join(second.path, 'config.toml'), 'utf8')).toBe('model = "o3"\n');
  });

  it('the user CODEX_HOME is the option, else $CODEX_HOME, else ~/.codex', () => {
    expect(userCodexHome('/a', { CODEX_HOME: '/b', HOME: '/h' })).toBe('/a');
    expect(userCodexHome(undefined, { CODEX_HOME: '/b', HOME: '/h' })).toBe('/b');
    expect(userCodexHome(undefined, { HOME: '/h' })).toBe('/h/.codex');
  });
});

describe('the rollout file that travels with a session', () => {
  it('is exported by thread id and imported into another CODEX_HOME at the same path', async () => {
    const a = join(root, 'a');
    mkdirSync(join(a, 'sessions', '2026', '11', '29'), { recursive: true });
    writeFileSync(join(a, 'sessions', ROLLOUT), '{"type":"session_meta"}\n');
    const state = await exportCodexRollout(a, THREAD);
    expect(state).toEqual({ version: 1, path: ROLLOUT, content: '{"type":"session_meta"}\n' });
    expect(await exportCodexRollout(a, '01a22958-0000-7000-8000-000000000000')).toBeNull();
    const b = join(root, 'b');
    await importCodexRollout(b, THREAD, state!);
    expect(readFileSync(join(b, 'sessions', ROLLOUT), 'utf8')).toBe(state!.content);
  });

  it('exact (a workspace going back to its recorded point): the stored rollout replaces a local copy further along', async () => {
    const user = join(root, 'user-codex');
    const state = join(root, 'state');
    const home = managedCodexHomePath(user, state);
    mkdirSync(join(home, 'sessions', '2026', '11', '29'), { recursive: true });
    writeFileSync(join(home, 'sessions', ROLLOUT), 'line1\nline2\ncancelled tool call\n');
    const stored = JSON.stringify({ version: 1, path: ROLLOUT, content: 'line1\nline2\n' });
    const options = { codexHome: user, env: { SESSIOND_STATE_DIR: state } };
    await codex.importState?.(options, THREAD, stored, { exact: true });
    expect(readFileSync(join(home, 'sessions', ROLLOUT), 'utf8')).toBe('line1\nline2\n');
  });

  it('does not overwrite a local copy that is further along; replaces an older one in place, even in another date folder', async () => {
    const home = join(root, 'h');
    const other = `2026/12/01/rollout-2026-12-01T00-00-00-${THREAD}.jsonl`;
    mkdirSync(join(home, 'sessions', '2026', '12', '01'), { recursive: true });
    writeFileSync(join(home, 'sessions', other), 'line1\nline2\n');
    await importCodexRollout(home, THREAD, { version: 1, path: ROLLOUT, content: 'line1\n' });
    expect(readFileSync(join(home, 'sessions', other), 'utf8')).toBe('line1\nline2\n');
    await importCodexRollout(home, THREAD, { version: 1, path: ROLLOUT, content: 'line1\nline2\nline3\n' });
    expect(readFileSync(join(home, 'sessions', other), 'utf8')).toBe('line1\nline2\nline3\n');
    expect(() => lstatSync(join(home, 'sessions', ROLLOUT))).toThrow();
  });

  it('refuses a state that is not a rollout of that thread or that leaves the sessions folder', async () => {
    const home = join(root, 'h');
    await expect(
      importCodexRollout(home, THREAD, { version: 1, path: `../../etc/rollout-x-${THREAD}.jsonl`, content: '' }),
    ).rejects.toThrow();
    await expect(
      importCodexRollout(home, '01a22958-0000-7000-8000-000000000000', { version: 1, path: ROLLOUT, content: '' }),
    ).rejects.toThrow();
  });
});
