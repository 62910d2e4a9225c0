import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { brokeredAgentDir, piModelRoute, writeModels } from '../../../src/agents/pi/brokered-agent-dir.ts';

const root = mkdtempSync(join(tmpdir(), 'pi-brokered-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const managed = join(root, 'managed');
mkdirSync(managed, { recursive: true });
writeFileSync(
  join(managed, 'models.json'),
  JSON.stringify({
    providers: {
      mine: {
        baseUrl: 'https://models.example/v1',
        api: 'openai-completions',
        apiKey: 'MY_KEY_VAR',
        headers: { 'x-extra': 'secret-header' },
        models: [{ id: 'm' }],
      },
      other: { baseUrl: 'https://other.example', apiKey: 'sk-other-literal-key', models: [{ id: 'o' }] },
      cmd: { baseUrl: 'https://cmd.example', apiKey: '!pass show key', models: [{ id: 'c' }] },
    },
  }),
);
writeFileSync(join(managed, 'auth.json'), '{"anthropic":{"key":"sk-login"}}');
writeFileSync(join(managed, 'settings.json'), '{}');

describe("pi's agent dir under egress", () => {
  it('the route: baseUrl and the key (an env var name resolved, else the literal); none for a !command key or an unknown provider', async () => {
    expect(await piModelRoute(managed, 'mine', { MY_KEY_VAR: 'sk-from-env-123' })).toEqual({
      baseUrl: new URL('https://models.example/v1'),
      key: 'sk-from-env-123',
    });
    expect(await piModelRoute(managed, 'other', {})).toEqual({
      baseUrl: new URL('https://other.example'),
      key: 'sk-other-literal-key',
    });
    expect(await piModelRoute(managed, 'cmd', {})).toBeNull();
    expect(await piModelRoute(managed, 'nope', {})).toBeNull();
    expect(await piModelRoute(managed, undefined, {})).toBeNull();
  });

  it('brokered: no key and no header value left, the provider on the bridge, no auth.json; the dir goes with cleanup', async () => {
    const { dir, cleanup } = await brokeredAgentDir(managed, join(root, 'attempts'), true);
    await writeModels(managed, dir, 'mine', 'http://127.0.0.1:4000/v1', 'PLACEHOLDER');
    const text = readFileSync(join(dir, 'models.json'), 'utf8');
    for (const secret of ['MY_KEY_VAR', 'sk-other-literal-key', 'secret-header', 'pass show'])
      expect(text).not.toContain(secret);
    const models = JSON.parse(text) as { providers: Record<string, { baseUrl: string; apiKey: string }> };
    expect(models.providers.mine).toMatchObject({ baseUrl: 'http://127.0.0.1:4000/v1', apiKey: 'PLACEHOLDER' });
    expect(models.providers.other).toMatchObject({ baseUrl: 'https://other.example', apiKey: 'PLACEHOLDER' });
    expect(readdirSync(dir).sort()).toEqual(['models.json', 'sessions', 'settings.json']);
    await cleanup();
    expect(existsSync(dir)).toBe(false);
  });

  it('not brokered (a !command key): the provider keeps its entry and pi keeps its logins (auth.json)', async () => {
    const { dir, cleanup } = await brokeredAgentDir(managed, join(root, 'attempts'), false);
    await writeModels(managed, dir, 'cmd', null, 'PLACEHOLDER');
    const models = JSON.parse(readFileSync(join(dir, 'models.json'), 'utf8')) as {
      providers: Record<string, { apiKey: string }>;
    };
    expect(models.providers.cmd?.apiKey).toBe('!pass show key');
    expect(models.providers.other?.apiKey).toBe('PLACEHOLDER');
    expect(readdirSync(dir)).toContain('auth.json');
    await cleanup();
  });
});
