/**
 * What an agent declares about its privileges, so that a deployment policy can bound them
 * without knowing the agent (each agent's definition.ts fills this in).
 */
export interface PermissionKnobs {
  /** The option that grants privilege in ordered steps, lowest first (e.g. Codex `sandbox`). */
  ladder?: {
    option: string;
    steps: readonly string[];
    /** What the agent does when no value is given. */
    defaultStep: string;
    /** The highest step a deployment allows callers when its policy names none. */
    defaultCeiling: string;
  };
  /** Options whose list items each grant something (pi `tools`, Claude Code `allowedTools`). */
  lists?: ReadonlyArray<{
    option: string;
    /** What callers may list when the policy names nothing: `'*'` anything. */
    defaultAllowed: readonly string[] | '*';
    /** Without a caller's value the agent enables everything (pi's tools): then a restricted policy applies its list. */
    absentMeansAll: boolean;
  }>;
  /** Boolean host options that let the agent load code of the working directory (pi extensions): off unless the policy enables them. */
  switches?: ReadonlyArray<{ option: string; description: string }>;
}
