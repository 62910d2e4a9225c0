export { createWorkspaces } from './workspaces.ts';
export { probeGit } from './git.ts';
export { DEFAULT_WORKSPACE_EXCLUDE } from './layout.ts';
export {
  WorkspaceInputError,
  WorkspaceQuotaError,
  type Snapshot,
  type SnapshotOptions,
  type WorkspaceConfig,
  type Workspaces,
  type WorkspaceSource,
} from './types.ts';
