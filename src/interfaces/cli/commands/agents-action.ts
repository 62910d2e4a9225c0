import { execFile } from 'node:child_process';
import { resolveAgentCli } from '../../../agents/shared/agent-env.ts';
import { describeAcpResume, probeAcpResume } from '../../../agents/acp/capabilities.ts';
import { acpAgentName } from '../../../agents/acp/registry-entry.ts';
import { AGENT_NAMES, agentDefinition, type AnyAgentName } from '../../../agents/registry.ts';
import { agentEnv } from '../../../agents/shared/agent-env.ts';
import { agentHostOptions, type Config } from '../../../config/config.ts';
import type { PermissionKnobs } from '../../../policy/knobs.ts';
import { detectSandbox } from '../../../process/index.ts';

/** One agent as `sessiond agents` lists it. */
export interface AgentRow {
  name: string;
  /** The executable this host runs for it (its configured `command`, else the agent's default). */
  command: string;
  /** First line `<command> --version` printed (on stdout, else stderr, as pi does), or null when it did not answer. */
  version: string | null;
  /** The command could be started on this host (false: not found, or not executable). */
  installed: boolean;
  resume: string;
  permissions: string;
  /** The sandbox its attempts run in on this host (SESSIOND_SANDBOX and what the host can give; docs/sandbox.md). */
  sandbox: string;
}

const DEFAULT_COMMANDS: Record<string, string> = {
  pi: 'pi',
  'claude-code': 'claude',
  codex: 'codex',
  gemini: 'gemini',
};
const RESUME: Record<string, string> = {
  pi: 'yes: --session, its session file travels with the session (any host)',
  'claude-code': 'yes: --resume, its session file travels with the session (any host)',
  codex: 'yes: resume, its rollout file travels with the session (any host)',
  gemini: 'yes: --resume, its chat file travels with the session (any host)',
};
/** Node CLIs take seconds to print a version on a busy host; they are asked one after another. */
const VERSION_TIMEOUT_MS = 30_000;

/**
 * The registry's agents and this host's `acp:<name>` agents, with what each supports: an ACP
 * agent's resume support is what its own `initialize` answers (each is started once, then stopped).
 */
export async function describeAgents(config: Config, env: NodeJS.ProcessEnv = process.env): Promise<AgentRow[]> {
  const host = agentHostOptions(config, AGENT_NAMES, env);
  const names: AnyAgentName[] = [...AGENT_NAMES, ...Object.keys(config.agents).filter(acpAgentName).sort()];
  const rows: AgentRow[] = [];
  const sandboxHost = detectSandbox(env);
  const sandbox =
    sandboxHost.refused !== null
      ? `refused: ${sandboxHost.refused}`
      : sandboxHost.gaps.length === 0
        ? sandboxHost.mode
        : `${sandboxHost.mode} (${sandboxHost.detail}; does not stop: ${sandboxHost.gaps.join('; ')})`;
  for (const name of names) {
    const options = host[name] ?? {};
    const acp = acpAgentName(name);
    const command = typeof options.command === 'string' ? options.command : (DEFAULT_COMMANDS[name] ?? '');
    const extra =
      options.env !== null && typeof options.env === 'object' ? (options.env as Record<string, string>) : {};
    const sealed = agentEnv(extra);
    const { version, installed } =
      command === '' ? { version: null, installed: false } : await versionOf(command, sealed);
    const args = Array.isArray(options.args) ? options.args.map(String) : [];
    const resume = !acp
      ? (RESUME[name] ?? 'unknown')
      : describeAcpResume(
          version === null ? null : await probeAcpResume({ command, args, env: sealed, timeoutMs: VERSION_TIMEOUT_MS }),
        );
    rows.push({
      name,
      command: command === '' ? '(not configured)' : command,
      version,
      installed,
      resume,
      permissions: describeKnobs(agentDefinition(name).permissions),
      sandbox,
    });
  }
  return rows;
}

export function describeKnobs(knobs: PermissionKnobs): string {
  const parts: string[] = [];
  if (knobs.ladder !== undefined)
    parts.push(
      `${knobs.ladder.option}: ${knobs.ladder.steps.join(' < ')} (default ${knobs.ladder.defaultStep}, ceiling ${knobs.ladder.defaultCeiling} unless the policy says)`,
    );
  for (const list of knobs.lists ?? [])
    parts.push(
      `${list.option}: a list (${list.defaultAllowed === '*' ? 'anything' : list.defaultAllowed.join(', ') || 'nothing'} unless the policy says)`,
    );
  for (const sw of knobs.switches ?? []) parts.push(`${sw.option}: off unless the policy enables it`);
  return parts.length === 0 ? 'none' : parts.join('; ');
}

/**
 * `<command> --version` in the agent's sealed environment (never a shell): the first line it printed
 * on stdout, else on stderr (pi prints its version there), null when it failed or printed nothing;
 * `installed` false when the command could not be started at all.
 */
async function versionOf(
  command: string,
  env: Record<string, string>,
): Promise<{ version: string | null; installed: boolean }> {
  const resolved = await resolveAgentCli(command, env);
  return new Promise((resolve) => {
    execFile(
      resolved,
      ['--version'],
      { env, timeout: VERSION_TIMEOUT_MS, maxBuffer: 64 * 1024 },
      (error, stdout, stderr) => {
        const code = (error as NodeJS.ErrnoException | null)?.code;
        if (code === 'ENOENT' || code === 'EACCES') {
          resolve({ version: null, installed: false });
          return;
        }
        const first = (text: unknown) => String(text).trim().split('\n')[0]?.trim() ?? '';
        const line = first(stdout) || first(stderr);
        resolve({ version: error !== null || line === '' ? null : line.slice(0, 200), installed: true });
      },
    );
  });
}
