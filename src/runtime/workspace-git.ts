import { ConfigError } from '../errors.ts';
import { probeGit } from '../workspace/index.ts';

/** How workspaces are turned off, said in the error of a host without git. */
export const WORKSPACES_OFF_HINT =
  'SESSIOND_WORKSPACES_ENABLED=false (config workspaces.enabled: false; a library worker: `workspaces: false`)';

/**
 * A worker with workspaces needs the host's git for every session without a caller-named cwd: one
 * without a usable git refuses to start (a ConfigError naming both fixes) rather than fail each such
 * session's first attempt, or run it somewhere else without saying so. Resolves with `git --version`.
 */
export async function requireWorkspaceGit(): Promise<string> {
  const git = await probeGit();
  if (git.ok) return git.version;
  throw new ConfigError(
    `workspaces.enabled: per-session workspaces are on (the default) and need git on this host, which cannot run: ${git.reason}. Install git, or turn workspaces off: ${WORKSPACES_OFF_HINT}`,
  );
}
