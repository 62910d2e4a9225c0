import { mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { prepareManagedAgentDir } from '../../../src/agents/pi/home.ts';

const roots: string[] = [];

afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

function userDirWith(settings: Record<string, unknown>): { userDir: string; stateDir: string } {
  const root = mkdtempSync(join(tmpdir(), 'pi-agent-dir-'));
  roots.push(root);
  const userDir = join(root, 'agent');
  mkdirSync(userDir);
  writeFileSync(join(userDir, 'settings.json'), JSON.stringify(settings));
  writeFileSync(join(userDir, 'models.json'), '{}');
  return { userDir, stateDir: join(root, 'state') };
}

describe("pi's managed agent dir", () => {
  it('links the user’s files, keeps their settings, switches pi’s own retries off and takes all queued steers at once', async () => {
    const { userDir, stateDir } = userDirWith({
      theme: 'dark',
      retry: { enabled: true, provider: { maxRetries: 5, timeoutMs: 9 } },
      steeringMode: 'one-at-a-time',
    });
    const managed = await prepareManagedAgentDir(userDir, stateDir);
    expect(readlinkSync(join(managed, 'models.json'))).toBe(join(userDir, 'models.json'));
    expect(JSON.parse(readFileSync(join(managed, 'settings.json'), 'utf8'))).toEqual({
      theme: 'dark',
      retry: { enabled: false, provider: { maxRetries: 0, timeoutMs: 9 } },
      steeringMode: 'all',
    });
  });

  it('many attempts preparing a fresh one at the same moment all succeed, with the same result', async () => {
    const { userDir, stateDir } = userDirWith({});
    const managed = await Promise.all(Array.from({ length: 20 }, () => prepareManagedAgentDir(userDir, stateDir)));
    expect(new Set(managed).size).toBe(1);
    expect(JSON.parse(readFileSync(join(managed[0] ?? '', 'settings.json'), 'utf8'))).toEqual({
      retry: { enabled: false, provider: { maxRetries: 0 } },
      steeringMode: 'all',
    });
  });
});
