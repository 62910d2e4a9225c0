import type { Command } from 'commander';
import { ExitCode } from '../exit-codes.ts';
import { collectAgentOption } from '../parse-options.ts';
import { Readable, Writable } from 'node:stream';
import { openClient } from '../open-client.ts';

/** `sessiond acp`: speaks the Agent Client Protocol on stdio, as an agent an editor starts (see src/interfaces/acp/server.ts). */
export function registerAcp(program: Command): void {
  program
    .command('acp')
    .description(
      'Speak ACP on stdio (an editor such as Zed starts it as an agent server): each ACP session is a durable sessiond session run by any worker; needs only Redis',
    )
    .option('--agent <name>', "the agent of new sessions (default: the client's _meta.sessiond.agent, else pi)")
    .option(
      '--agent-option <key=value>',
      "an option of the agent (e.g. permissionMode=ask); repeatable; the client's _meta.sessiond.options add to these",
      collectAgentOption,
    )
    .option('--cwd <dir>', "the sessions' working directory on the workers' hosts (default: the client's cwd)")
    .action(async (flags: { agent?: string; agentOption?: Record<string, unknown>; cwd?: string }) => {
      process.exitCode = await runAcpServer(flags);
    });
}

async function runAcpServer(flags: {
  agent?: string;
  agentOption?: Record<string, unknown>;
  cwd?: string;
}): Promise<number> {
  // Split point: the ACP SDK and the server load when `acp` runs, not for `--help`.
  const [acp, { serveAcp }] = await Promise.all([import('@agentclientprotocol/sdk'), import('../../acp/server.ts')]);
  const ctx = await openClient();
  const defaults = {
    ...(flags.agentOption ?? {}),
    ...(flags.cwd === undefined ? {} : { cwd: flags.cwd }),
    ...(flags.agent === undefined ? {} : { agent: flags.agent }),
  };
  // stdout is the protocol's: nothing else may be written there.
  const connection = serveAcp(
    { client: ctx.client, defaults, version: '0.1.0', tenant: ctx.settings.caller.tenant },
    acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin) as ReadableStream<Uint8Array>),
  );
  const stop = (): void => connection.close();
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  await connection.closed;
  await ctx.close();
  return ExitCode.ok;
}
