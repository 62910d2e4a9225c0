import { userInfo } from 'node:os';
import type { Command } from 'commander';
import type { ApprovalVerdict } from '../../../runtime/approvals/decide.ts';
import { sessionCommandError } from '../cli-error.ts';
import { ExitCode } from '../exit-codes.ts';
import { printJson } from '../present.ts';
import { openClient } from '../open-client.ts';

/** `sessiond approve ID REQUEST [--option O]` and `sessiond deny ID REQUEST`: an operator's answer to an agent's permission request. */
export function registerApprovals(program: Command): void {
  for (const verdict of ['allow', 'deny'] as const) {
    program
      .command(verdict === 'allow' ? 'approve' : 'deny')
      .description(
        verdict === 'allow'
          ? "Allow an agent's permission request (see `inspect`: awaiting approval); exit 3 for an unknown session or request, 1 if already decided"
          : "Deny an agent's permission request; exit 3 for an unknown session or request, 1 if already decided",
      )
      .argument('<sessionId>')
      .argument('<requestId>')
      .option(
        '--option <id|kind>',
        verdict === 'allow'
          ? 'the option to give the agent: its id or kind (default allow_once)'
          : 'the option to give the agent: its id or kind (default reject_once)',
      )
      .option('--reason <text>', 'recorded with the decision')
      .option('--json', 'print the decision as JSON')
      .action(
        async (sessionId: string, requestId: string, flags: { option?: string; reason?: string; json?: boolean }) => {
          process.exitCode = await decide(verdict, sessionId, requestId, flags);
        },
      );
  }
}

async function decide(
  verdict: ApprovalVerdict,
  sessionId: string,
  requestId: string,
  flags: { option?: string; reason?: string; json?: boolean },
): Promise<number> {
  const ctx = await openClient();
  try {
    const result = await ctx.client.approvals.decide(sessionId, requestId, {
      verdict,
      by: `cli:${operatorName()}`,
      ...(flags.option === undefined ? {} : { option: flags.option }),
      ...(flags.reason === undefined ? {} : { reason: flags.reason }),
    });
    if (flags.json === true) printJson(result);
    else
      process.stdout.write(
        `${requestId}: ${result.outcome}${result.optionId === null ? '' : ` (option ${result.optionId})`} by ${result.by}\n`,
      );
    return ExitCode.ok;
  } catch (error) {
    throw sessionCommandError(error);
  } finally {
    await ctx.close();
  }
}

function operatorName(): string {
  try {
    return userInfo().username;
  } catch {
    // No user name on this host: the decision is recorded by 'unknown'.
    return 'unknown';
  }
}
