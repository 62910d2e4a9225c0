import { sessiondStateDir } from '../agents/shared/managed-files.ts';
import { WORKSPACE_DEFAULTS, workspacePaths } from '../config/defaults.ts';
import { ConfigError } from '../errors.ts';
import { checkConfig } from '../workspace/layout.ts';
import { WorkspaceInputError, type WorkspaceConfig } from '../workspace/types.ts';

/**
 * A library caller's `workspaces` option checked as the config file's is (src/workspace/layout.ts: the
 * root apart from sessiond's git data, the store's form, the quotas): a ConfigError naming the field,
 * before anything connects or starts.
 */
export function checkWorkspacesOption(workspaces: WorkspaceConfig): void {
  try {
    checkConfig(workspaces);
  } catch (error) {
    if (!(error instanceof WorkspaceInputError)) throw error;
    throw new ConfigError(`workspaces.${error.field}: ${error.problem}`);
  }
}

/**
 * The workspaces of a library worker or client, as the CLI's: absent, on, under sessiond's state dir
 * ($SESSIOND_STATE_DIR, else $XDG_STATE_HOME/sessiond, else ~/.local/state/sessiond: where its agents'
 * managed homes already are) with the default exclude list and quotas; `false`, none; a value, that
 * value, checked (null: none).
 */
export function resolveWorkspacesOption(workspaces: WorkspaceConfig | false | undefined): WorkspaceConfig | null {
  if (workspaces === false) return null;
  const resolved = workspaces ?? {
    ...workspacePaths(sessiondStateDir(process.env)),
    exclude: WORKSPACE_DEFAULTS.exclude,
    maxBytes: WORKSPACE_DEFAULTS.maxBytes,
    maxSnapshots: WORKSPACE_DEFAULTS.maxSnapshots,
  };
  checkWorkspacesOption(resolved);
  return resolved;
}
