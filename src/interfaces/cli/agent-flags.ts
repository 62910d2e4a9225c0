/** The agent flags `run` and `enqueue` share. */
export interface AgentFlags {
  agentOption?: Record<string, unknown>;
  cwd?: string;
  provider?: string;
  model?: string;
  thinking?: string;
  agentDir?: string;
  idleTimeout?: number;
}

/** The agent options these flags ask for: `--agent-option` entries first, the named flags over them. */
export function agentOptionsFromFlags(flags: AgentFlags): Record<string, unknown> {
  return {
    ...(flags.agentOption ?? {}),
    ...(flags.cwd === undefined ? {} : { cwd: flags.cwd }),
    ...(flags.provider === undefined ? {} : { provider: flags.provider }),
    ...(flags.model === undefined ? {} : { model: flags.model }),
    ...(flags.thinking === undefined ? {} : { thinking: flags.thinking }),
    ...(flags.agentDir === undefined ? {} : { agentDir: flags.agentDir }),
    ...(flags.idleTimeout === undefined ? {} : { idleTimeoutMs: flags.idleTimeout }),
  };
}
