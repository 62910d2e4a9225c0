import type { Command } from 'commander';
import { Option } from 'commander';
import { BUILTIN_AGENT_NAMES as AGENT_NAMES } from '../agent-names.ts';
import { CliError } from '../cli-error.ts';
import { ExitCode } from '../exit-codes.ts';
import { printJson } from '../present.ts';
import { addAgentFlagOptions, turnOptionsFromFlags, type TurnFlags } from '../agent-flags.ts';
import { parseIntegerOption } from '../parse-options.ts';
import { MAX_PRIORITY, MIN_PRIORITY } from '../../../runtime/priority.ts';
import { addRetryPolicyOptions, retryPatchFromFlags } from '../retry-flags.ts';
import { hasErrorCode } from '../../../errors.ts';
import { callerIssues } from '../../../config/caller.ts';
import { openClient } from '../open-client.ts';
import { followSession } from '../follow.ts';
import { WHEN_BUSY } from '../../../policy/index.ts';

/** The strategies of `--when-busy` (the schema's WHEN_BUSY: spelled here so that `--help` loads no zod). */
interface EnqueueFlags extends TurnFlags {
  session?: string;
  follow?: boolean;
  webhook?: string;
}

export function registerEnqueue(program: Command): void {
  const command = program
    .command('enqueue')
    .description('Add a prompt to a session (created if new) and make sure a worker runs it; prints the session id')
    .argument('<prompt>', 'the prompt')
    .option('--session <id>', 'the session to add the prompt to (default: a new session)')
    .addOption(
      new Option(
        '--agent <name>',
        `the agent (for a new session): ${AGENT_NAMES.join(', ')}, or acp:<name> for an ACP agent the workers configure`,
      ),
    );
  addAgentFlagOptions(command, { onWorker: true });
  addRetryPolicyOptions(command, 'retry policy of this session (overrides the global one)');
  command
    .option(
      '--repo <url>',
      "a new session's workspace starts as a clone of this repository (policy.workspaces.repos says which; docs/workspaces.md)",
    )
    .option('--ref <ref>', 'the branch, tag or commit of --repo (default: its HEAD)')
    .option(
      '--retention <duration>',
      'keep the session this long once finished (e.g. 7d; 0: forever), within the deployment maximum',
    )
    .option(
      '--tenant <name>',
      'the tenant of a new session: only the configured one (caller.tenant, SESSIOND_TENANT; default local)',
    )
    .option(
      '--priority <n>',
      'higher starts first under a fleet limit or a full fleet (-1000…caller.maxPriority, default 0); the session keeps it for its later prompts',
      parseIntegerOption('--priority', MIN_PRIORITY, MAX_PRIORITY),
    )
    .addOption(
      new Option(
        '--when-busy <strategy>',
        'when a turn runs or prompts wait: enqueue (wait, the default), steer (into the running turn at its next safe point; a new turn if none runs), interrupt (stop the running turn, run next), reject (refuse: exit 1, nothing stored), rollback (interrupt, then take the turn back: files and conversation; a workspace session only); policy.whenBusy may allow fewer',
      ).choices(WHEN_BUSY),
    )
    .option(
      '--webhook <url>',
      "POST this session's events to URL (its host must be in policy.webhooks.hosts); prints the signing secret (whsec_…) once, on stderr (in --json: webhookSecret)",
    )
    .option('--json', 'print {"sessionId","turn"}')
    .option('--follow', 'stream the turn until it ends; exit 0 completed, 1 failed, 130 cancelled or Ctrl+C')
    .action(async (prompt: string, flags: EnqueueFlags) => {
      process.exitCode = await enqueue(prompt, flags);
    });
}

async function enqueue(prompt: string, flags: EnqueueFlags): Promise<number> {
  const options = turnOptionsFromFlags(flags);
  const retryPolicy = retryPatchFromFlags(flags);
  const ctx = await openClient();
  try {
    // Issue 25: the tenant and the highest priority are the local caller's (config `caller`), not what a flag claims.
    const claimed = callerIssues(ctx.settings.caller, { tenant: flags.tenant, priority: flags.priority });
    if (claimed.length > 0)
      throw new CliError(claimed.map((i) => `--${i.field}: ${i.message}`).join('\n'), ExitCode.usage);
    // A session not readable yet follows from its first message.
    const fromSeq =
      flags.session === undefined
        ? 1
        : (await ctx.client
            .session(flags.session)
            .lastSeq()
            .catch(() => 0)) + 1;
    let result;
    try {
      result = await ctx.client.sessions.enqueue({
        prompt,
        ...(flags.session === undefined ? {} : { sessionId: flags.session }),
        ...(Object.keys(options).length === 0 ? {} : { options }),
        ...(retryPolicy === undefined ? {} : { retryPolicy }),
        ...(flags.retention === undefined ? {} : { retention: flags.retention }),
        tenant: ctx.settings.caller.tenant,
        ...(flags.priority === undefined ? {} : { priority: flags.priority }),
        ...(flags.whenBusy === undefined ? {} : { whenBusy: flags.whenBusy }),
        ...(flags.webhook === undefined ? {} : { webhook: flags.webhook }),
      });
    } catch (error) {
      if (hasErrorCode(error, 'invalid_input')) throw new CliError(error.message, ExitCode.usage);
      if (hasErrorCode(error, 'conflict') || hasErrorCode(error, 'quota_exceeded'))
        throw new CliError(error.message, ExitCode.failed);
      throw error;
    }
    if (flags.json === true && flags.follow !== true)
      printJson({
        sessionId: result.sessionId,
        turn: result.turn,
        promptId: result.promptId,
        ...(result.steered ? { steered: true } : {}),
        ...(result.webhookSecret === undefined ? {} : { webhookSecret: result.webhookSecret }),
      });
    else {
      // Shown once: sessiond keeps it only to sign with, and no command prints it again.
      if (result.webhookSecret !== undefined)
        process.stderr.write(`webhook secret (shown once): ${result.webhookSecret}\n`);
      if (flags.follow !== true) process.stdout.write(`${result.sessionId}\n`);
    }
    if (flags.follow !== true) return ExitCode.ok;

    process.stderr.write(`session ${result.sessionId}, turn ${result.turn}\n`);
    const controller = new AbortController();
    let interrupted = false;
    const onSignal = (): void => {
      if (interrupted) return;
      interrupted = true;
      process.stderr.write('\nsessiond: cancelling the turn…\n');
      // The follow prints how the turn ended; a cancel that cannot be sent leaves it running, as without Ctrl+C.
      void ctx.client
        .session(result.sessionId)
        .cancel('Ctrl+C from enqueue --follow')
        .catch(() => undefined);
    };
    process.on('SIGINT', onSignal);
    try {
      const summary = await followSession(ctx.client.session(result.sessionId), {
        workers: () => ctx.client.deployment.workers(),
        fromSeq,
        json: flags.json === true,
        until: result.turn,
        signal: controller.signal,
      });
      const turn = summary?.turn;
      if (interrupted || turn?.status === 'cancelled') return ExitCode.interrupted;
      if (turn?.status === 'failed') {
        process.stderr.write(
          `sessiond: turn ${turn.index} failed (${turn.failureReason ?? 'unknown'}): ${summary?.lastFailure?.category ?? ''} ${summary?.lastFailure?.errorText.split('\n')[0] ?? ''}\n`,
        );
        return ExitCode.failed;
      }
      return ExitCode.ok;
    } finally {
      process.off('SIGINT', onSignal);
    }
  } finally {
    await ctx.close();
  }
}
