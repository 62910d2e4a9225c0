export type { PermissionKnobs } from './knobs.ts';
export {
  PolicyError,
  PolicySchema,
  resolvePolicy,
  WHEN_BUSY,
  type WhenBusy,
  type AgentPermissions,
  type ApprovalPolicy,
  type DeploymentPolicy,
  type PolicyInput,
} from './schema.ts';
export { checkTurn, webhookIssue, type PolicyCheck, type PolicyIssue } from './check.ts';
