/**
 * The registry's agent names, for the CLI's help and flag choices without loading the agents
 * (src/agents/registry.ts imports every agent; `sessiond --help` should not). A unit test keeps
 * this list equal to the registry's AGENT_NAMES.
 */
export const BUILTIN_AGENT_NAMES = ['claude-code', 'gemini', 'codex', 'pi'] as const;
