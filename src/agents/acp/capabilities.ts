import { PROTOCOL_VERSION } from '@agentclientprotocol/sdk';
import { spawnAgent } from '../../process/index.ts';
import { resolveAgentCli } from '../shared/agent-env.ts';

/** What an ACP agent's `initialize` says about resuming its sessions. */
export interface AcpResumeCapabilities {
  /** `sessionCapabilities.resume`: it continues a session without replaying it. */
  resume: boolean;
  /** `loadSession`: it loads a session, replaying its history. */
  load: boolean;
}

export interface AcpProbe {
  command: string;
  args: readonly string[];
  env: Record<string, string>;
  cwd?: string;
  /** How long the agent may take to answer `initialize` (Node CLIs take seconds on a busy host). */
  timeoutMs: number;
}

/**
 * Starts the agent as an attempt would (sealed env, no shell, stdin a pipe), sends `initialize`,
 * reads its answer's capabilities, and stops its tree. Null when it does not start or answer in
 * time. Contract: never throws; no process of it is left when it resolves.
 */
export async function probeAcpResume(probe: AcpProbe): Promise<AcpResumeCapabilities | null> {
  const spawned = await spawnAgent({
    command: await resolveAgentCli(probe.command, probe.env),
    args: probe.args,
    ...(probe.cwd === undefined ? {} : { cwd: probe.cwd }),
    env: probe.env,
    stdinMode: 'pipe',
    interruptSignal: 'SIGTERM',
    idleTimeoutMs: probe.timeoutMs,
    stderrTailBytes: 4096,
  });
  if (!spawned.ok) return null;
  const agent = spawned.agent;
  try {
    const request = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: PROTOCOL_VERSION,
        clientCapabilities: {},
        clientInfo: { name: 'sessiond', version: '0' },
      },
    };
    agent.stdin?.write(`${JSON.stringify(request)}\n`);
    const timeout = new Promise<null>((resolve) => setTimeout(() => resolve(null), probe.timeoutMs).unref());
    return await Promise.race([answerOf(agent.lines()), timeout]);
  } finally {
    agent.stdin?.end();
    await agent.stop('requested');
  }
}

async function answerOf(lines: AsyncIterable<string>): Promise<AcpResumeCapabilities | null> {
  for await (const line of lines) {
    let message: {
      id?: unknown;
      result?: { agentCapabilities?: { loadSession?: unknown; sessionCapabilities?: { resume?: unknown } } };
    };
    try {
      message = JSON.parse(line) as typeof message;
    } catch {
      // A line that is not JSON is not the initialize answer: skip it.
      continue;
    }
    if (message?.id !== 1) continue;
    const caps = message.result?.agentCapabilities;
    if (message.result === undefined) return null;
    return {
      resume: caps?.sessionCapabilities?.resume !== undefined && caps.sessionCapabilities.resume !== null,
      load: caps?.loadSession === true,
    };
  }
  return null;
}

/** `sessiond agents`' resume column for an ACP agent, from what its `initialize` said (see provider.ts for what an attempt does). */
export function describeAcpResume(caps: AcpResumeCapabilities | null): string {
  if (caps === null) return 'unknown: the agent did not answer initialize';
  if (caps.resume) return 'yes: session/resume (its sessions stay on this host)';
  if (caps.load)
    return 'yes: session/load, its replay dropped; a load it refuses runs the turn in a new session, which session.started says (same host only)';
  return 'no: it offers neither session/resume nor session/load, every turn starts a new session';
}
