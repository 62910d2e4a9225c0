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
