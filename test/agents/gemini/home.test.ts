import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
  existsSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  managedGeminiHome,
  managedSettings,
  prepareManagedGeminiHome,
  stripJsonComments,
  userGeminiDir,
} from '../../../src/agents/gemini/home.ts';
import { geminiArgs, GeminiOptionsSchema } from '../../../src/agents/gemini/options.ts';
import { geminiEnv } from '../../../src/agents/gemini/provider.ts';

let root: string;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'gemini-home-'));
});

afterEach(() => {
  rmSync(root, { recursive: true, force: true });
});

describe('the managed gemini home', () => {
  it("forces one attempt, API-key auth, no telemetry and no auto-update over the user's settings, keeping the rest", () => {
    const settings = managedSettings({
      general: { maxAttempts: 10, vimMode: true, disableAutoUpdate: false },
      security: {
        auth: { selectedType: 'oauth-personal', useExternal: false },
        environmentVariableRedaction: { enabled: true, allowed: ['FOO'] },
      },
      telemetry: { enabled: true, target: 'gcp' },
      mcpServers: { x: { command: 'y' } },
    });
    expect(settings).toEqual({
      general: { maxAttempts: 1, vimMode: true, enableAutoUpdate: false, enableAutoUpdateNotification: false },
      security: {
        auth: { selectedType: 'gemini-api-key', useExternal: false },
        environmentVariableRedaction: { enabled: true, allowed: ['FOO', 'SESSIOND_AGENT_MARKER'] },
      },
      telemetry: { enabled: false, target: 'gcp' },
      privacy: { usageStatisticsEnabled: false },
      mcpServers: { x: { command: 'y' } },
    });
  });

  it("links the user's read-mostly config, writes settings.json, never touches the user's dir", async () => {
    const user = join(root, 'user', '.gemini');
    mkdirSync(join(user, 'commands'), { recursive: true });
    mkdirSync(join(user, 'tmp', 'proj', 'chats'), { recursive: true });
    writeFileSync(join(user, 'GEMINI.md'), '# memory');
    writeFileSync(join(user, 'oauth_creds.json'), '{}');
    const userSettings = '{\n  // the user likes comments\n  "general": {"maxAttempts": 7}, "url": "http://x//y"\n}\n';
    writeFileSync(join(user, 'settings.json'), userSettings);

    const home = await prepareManagedGeminiHome(user, join(root, 'state'));
    expect(home).toBe(managedGeminiHome(user, join(root, 'state')));
    const dir = join(home, '.gemini');
    expect(readlinkSync(join(dir, 'GEMINI.md'))).toBe(join(user, 'GEMINI.md'));
    expect(lstatSync(join(dir, 'commands')).isSymbolicLink()).toBe(true);
    for (const own of ['tmp', 'oauth_creds.json', 'projects.json', 'skills'])
      expect(existsSync(join(dir, own))).toBe(false);
    const managed = JSON.parse(readFileSync(join(dir, 'settings.json'), 'utf8')) as {
      general: { maxAttempts: number };
      url: string;
    };
    expect(managed.general.maxAttempts).toBe(1);
    expect(managed.url).toBe('http://x//y');
    expect(readFileSync(join(user, 'settings.json'), 'utf8')).toBe(userSettings);

    // A link whose target went away is removed on the next run.
    rmSync(join(user, 'GEMINI.md'));
    await prepareManagedGeminiHome(user, join(root, 'state'));
    expect(existsSync(join(dir, 'GEMINI.md'))).toBe(false);
    expect(lstatSync(join(dir, 'commands')).isSymbolicLink()).toBe(true);
  });

  it('a user settings.json that is not JSON is a clear error; none at all is fine', async () => {
    const user = join(root, 'user');
    mkdirSync(user, { recursive: true });
    await expect(prepareManagedGeminiHome(user, join(root, 'state'))).resolves.toBeTruthy();
    writeFileSync(join(user, 'settings.json'), '{ nope');
    await expect(prepareManagedGeminiHome(user, join(root, 'state'))).rejects.toThrow(/settings\.json: not valid JSON/);
  });

  it('strips comments but not comment-like text in strings', () => {
    expect(JSON.parse(stripJsonComments('{"a": "//x /* y */", /* c */ "b": 1 // d\n}'))).toEqual({
      a: '//x /* y */',
      b: 1,
    });
    expect(JSON.parse(stripJsonComments('{"a": "q\\"//"}'))).toEqual({ a: 'q"//' });
  });

  it("the user's dir: explicit, else $GEMINI_CLI_HOME/.gemini, else ~/.gemini", () => {
    expect(userGeminiDir('/x/conf', { HOME: '/h' })).toBe('/x/conf');
    expect(userGeminiDir(undefined, { HOME: '/h', GEMINI_CLI_HOME: '/g' })).toBe('/g/.gemini');
    expect(userGeminiDir(undefined, { HOME: '/h' })).toBe('/h/.gemini');
  });
});

describe('gemini argv and environment', () => {
  const parse = (input: Record<string, unknown>) =>
    GeminiOptionsSchema.parse({ prompt: 'p', model: 'gemini-2.5-flash', ...input });

  it('stream-json, an explicit model, an explicit approval mode (default: "default"), trust for this run, and no prompt in argv', () => {
    expect(geminiArgs(parse({}))).toEqual([
      '--output-format',
      'stream-json',
      '--model',
      'gemini-2.5-flash',
      '--approval-mode',
      'default',
      '--skip-trust',
    ]);
    const resumed = geminiArgs(
      parse({
        approvalMode: 'yolo',
        session: { mode: 'resume', id: '0f1e2d3c-0000-4000-8000-000000000001' },
        prompt: '--yolo',
      }),
    );
    expect(resumed).toEqual([
      '--output-format',
      'stream-json',
      '--model',
      'gemini-2.5-flash',
      '--approval-mode',
      'yolo',
      '--skip-trust',
      '--resume',
      '0f1e2d3c-0000-4000-8000-000000000001',
    ]);
  });

  it('rejects a missing model and the auto router', () => {
    expect(GeminiOptionsSchema.safeParse({ prompt: 'p' }).success).toBe(false);
    expect(GeminiOptionsSchema.safeParse({ prompt: 'p', model: 'auto' }).success).toBe(false);
    expect(GeminiOptionsSchema.safeParse({ prompt: 'p', model: 'auto-gemini-3' }).success).toBe(false);
  });

  it('the env: the managed gemini dir, no relaunch, a TMPDIR (the caller’s, else the managed one); HOME kept', () => {
    const env = geminiEnv({ HOME: '/h', PATH: '/bin', TMPDIR: '/inherited' }, '/state/gemini-home/k');
    expect(env).toEqual({
      HOME: '/h',
      PATH: '/bin',
      GEMINI_CLI_HOME: '/state/gemini-home/k',
      GEMINI_CLI_NO_RELAUNCH: 'true',
      TMPDIR: '/state/gemini-home/k/tmp',
    });
    expect(geminiEnv({ HOME: '/h', TMPDIR: '/t' }, '/m', { TMPDIR: '/t' }).TMPDIR).toBe('/t');
  });
});
