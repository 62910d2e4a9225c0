import { access, constants } from 'node:fs/promises';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Variables of sessiond itself that an agent (and the tools it runs) must never
 * see: the Redis URL and password, the API tokens, the HTTP signing secret.
 */
const PRIVATE_ENV = /^(REDIS_URL|REDIS_PASSWORD|SESSIOND_API_TOKEN|SESSIOND_API_TOKENS|SESSIOND_HTTP_SECRET|SESSIOND_TOKEN|SESSIOND_REDIS_.*)$/;

/** The agent's environment, built explicitly: sessiond's own environment minus its secrets, plus `extra`. */
export function agentEnv(extra: Record<string, string>, base: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(base)) {
    if (value !== undefined && !PRIVATE_ENV.test(key)) env[key] = value;
  }
  return { ...env, ...extra };
}

const PACKAGE_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** A command name looked up on PATH, then in sessiond's node_modules/.bin; a path is kept as it is. */
export async function resolveCommand(command: string, env: Record<string, string>): Promise<string> {
  if (command.includes('/')) return command;
  const dirs = [...(env.PATH ?? '').split(delimiter).filter((d) => d !== ''), join(process.cwd(), 'node_modules', '.bin'), join(PACKAGE_ROOT, 'node_modules', '.bin')];
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
