import { access, constants } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { resolveCommand } from '../shared/agent-env.ts';

const PACKAGE_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** Like `resolveCommand`, and then sessiond's agent-clis/node_modules/.bin, where the pinned CLIs are installed. */
export async function resolveAgentCli(command: string, env: Record<string, string>): Promise<string> {
  const resolved = await resolveCommand(command, env);
  if (resolved !== command || command.includes('/')) return resolved;
  const candidate = join(PACKAGE_ROOT, 'agent-clis', 'node_modules', '.bin', command);
  try {
    await access(candidate, constants.X_OK);
    return candidate;
  } catch {
    return command;
  }
}
