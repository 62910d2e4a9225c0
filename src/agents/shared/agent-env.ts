import { existsSync } from 'node:fs';
import { access, constants } from 'node:fs/promises';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { baseEnv } from '../../process/index.ts';

/**
 * The agent's environment, built from an allow-list: the base of the worker's environment
 * (`PATH`, `HOME`, `LANG`…, see process/sealed-env.ts) plus `extra`, what the operator configured
 * for this agent. Nothing else of the worker's environment. (`SESSIOND_*` entries of `extra`, such as
 * the state dir, are read by the provider and removed before the spawn.)
 */
export function agentEnv(extra: Record<string, string>, base: NodeJS.ProcessEnv = process.env): Record<string, string> {
  return { ...baseEnv(base), ...extra };
}

/** sessiond's own directory: the nearest one above this module holding a package.json (a checkout's src/ or the package's dist/src/). */
const PACKAGE_ROOT = packageRoot(dirname(fileURLToPath(import.meta.url)));

function packageRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) return from;
  }
}

/** A command name looked up on PATH, then in sessiond's node_modules/.bin; a path is kept as it is. */
export async function resolveCommand(command: string, env: Record<string, string>): Promise<string> {
  if (command.includes('/')) return command;
  const dirs = [
    ...(env.PATH ?? '').split(delimiter).filter((d) => d !== ''),
    join(process.cwd(), 'node_modules', '.bin'),
    join(PACKAGE_ROOT, 'node_modules', '.bin'),
  ];
  for (const dir of dirs) {
    const candidate = join(dir, command);
    try {
      await access(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return command;
}

/** Like `resolveCommand`, and then sessiond's agent-clis/node_modules/.bin, where the pinned CLIs are installed. */
export async function resolveAgentCli(command: string, env: Record<string, string>): Promise<string> {
  const resolved = await resolveCommand(command, env);
  if (resolved !== command || command.includes('/')) return resolved;
  const candidate = join(PACKAGE_ROOT, 'agent-clis', 'node_modules', '.bin', command);
  try {
    await access(candidate, constants.X_OK);
    return candidate;
  } catch {
    // Not resolvable here: the command is left to the spawn, which reports it missing.
    return command;
  }
}
