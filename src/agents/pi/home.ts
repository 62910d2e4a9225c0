import { mkdir, readdir, readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { linkEntry, managedDirFor, writeFileIfChanged } from '../shared/managed-files.ts';

/**
 * pi reads its retry behaviour from `<agentDir>/settings.json`. sessiond never
 * edits the user's own agent dir: each run gets a managed agent dir that links
 * every entry of the user's (models, auth, sessions, themes…) except
 * settings.json, which is the user's settings with pi's own retries switched off
 * and its steering mode `all`: at its next safe point pi takes every steer queued
 * by then (each its own user message, in order), not one per model request, so
 * that many steers to one turn do not cost a model request each (rpc.ts).
 */
export const NO_RETRY_SETTINGS = { retry: { enabled: false, provider: { maxRetries: 0 } } } as const;

export function userAgentDir(explicit: string | undefined, env: Record<string, string | undefined>): string {
  if (explicit !== undefined) return resolve(explicit);
  const fromEnv = env.PI_CODING_AGENT_DIR;
  if (fromEnv !== undefined && fromEnv !== '') return resolve(fromEnv);
  return join(env.HOME ?? homedir(), '.pi', 'agent');
}

/** Creates or refreshes the managed agent dir for `userDir`; returns its path. Throws with a clear message on I/O errors. */
export async function prepareManagedAgentDir(userDir: string, stateDir: string): Promise<string> {
  const managed = managedDirFor(stateDir, 'pi-agent', userDir);
  await mkdir(managed, { recursive: true, mode: 0o700 });
  const entries = await readdir(userDir).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return [] as string[];
    throw error;
  });
  for (const entry of entries) {
    if (entry === 'settings.json') continue;
    await linkEntry(join(userDir, entry), join(managed, entry));
  }
  await writeSettings(join(userDir, 'settings.json'), join(managed, 'settings.json'));
  return managed;
}

async function writeSettings(userSettingsPath: string, path: string): Promise<void> {
  let userSettings: Record<string, unknown> = {};
  // No user settings: the managed ones alone.
  const raw = await readFile(userSettingsPath, 'utf8').catch(() => null);
  if (raw !== null) {
    try {
      const parsed: unknown = JSON.parse(raw);
      if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed))
        userSettings = parsed as Record<string, unknown>;
    } catch {
      throw new Error(`${userSettingsPath}: not valid JSON; fix or remove it`);
    }
  }
  const userRetry =
    userSettings.retry !== null && typeof userSettings.retry === 'object'
      ? (userSettings.retry as Record<string, unknown>)
      : {};
  const userProvider =
    userRetry.provider !== null && typeof userRetry.provider === 'object'
      ? (userRetry.provider as Record<string, unknown>)
      : {};
  const settings = {
    ...userSettings,
    retry: { ...userRetry, enabled: false, provider: { ...userProvider, maxRetries: 0 } },
    // Not rpc's `set_steering_mode`: pi would save it into this file itself, racing other attempts' writes.
    steeringMode: 'all',
  };
  await writeFileIfChanged(path, `${JSON.stringify(settings, null, 2)}\n`);
}
