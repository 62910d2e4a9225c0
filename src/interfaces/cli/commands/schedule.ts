import type { Command } from 'commander';
import { Option } from 'commander';
import { BUILTIN_AGENT_NAMES as AGENT_NAMES } from '../agent-names.ts';
import { CliError, sessionCommandError } from '../cli-error.ts';
import { ExitCode } from '../exit-codes.ts';
import { printJson } from '../present.ts';
import { addAgentFlagOptions, turnOptionsFromFlags, type TurnFlags } from '../agent-flags.ts';
import { parseIntegerOption } from '../parse-options.ts';
import { MAX_PRIORITY, MIN_PRIORITY } from '../../../runtime/priority.ts';
import { addRetryPolicyOptions, retryPatchFromFlags } from '../retry-flags.ts';
import { hasErrorCode } from '../../../errors.ts';
import { callerIssues } from '../../../config/caller.ts';
import { openClient } from '../open-client.ts';
import { WHEN_BUSY } from '../../../policy/index.ts';
import type { ScheduleView } from '../../../runtime/schedules/spec.ts';

/** The strategies of `--when-busy` (as `enqueue`'s). */
interface AddFlags extends TurnFlags {
  cron?: string;
  tz?: string;
  every?: string;
  session?: string;
  new?: boolean;
  id?: string;
}

/** `sessiond schedule add | list | remove | pause | resume | runs` (docs/schedules.md). */
export function registerSchedule(program: Command): void {
  const schedule = program
    .command('schedule')
    .description(
      'Prompts on a schedule: a cron expression (with a time zone) or an interval, into one session or a new session per firing; the workers fire them, once per tick fleet-wide',
    );
  const add = schedule
    .command('add')
    .description(
      'Add a schedule: (--cron EXPR [--tz ZONE] | --every DURATION) (--session ID | --new) PROMPT; prints its id and next run. Each firing is the enqueue these flags describe, checked now as that enqueue would be',
    )
    .argument('<prompt>', 'the prompt each firing enqueues')
    .option('--cron <expr>', 'a cron expression (minute hour day month weekday, an optional seconds field first)')
    .option('--tz <zone>', 'the time zone of --cron (an IANA name such as Europe/Paris; default UTC)')
    .option('--every <duration>', 'a fixed interval (e.g. 15m, 1h), at least the deployment’s schedules.minInterval')
    .option('--session <id>', 'the session every firing prompts (it must exist)')
    .option('--new', 'a new session per firing, named <schedule id>.<tick> (sessiond list finds them by that id)')
    .option('--id <name>', "the schedule's id (1-64 letters, digits, _ or -; default sch-<8 hex digits>)")
    .addOption(
      new Option(
        '--agent <name>',
        `the agent of each new session (--new): ${AGENT_NAMES.join(', ')}, or acp:<name> for an ACP agent the workers configure`,
      ),
    );
  addAgentFlagOptions(add, { onWorker: true });
  addRetryPolicyOptions(add, 'retry policy of the sessions it prompts');
  add
    .option('--repo <url>', "each new session's workspace starts as a clone of this repository (with --new)")
    .option('--ref <ref>', 'the branch, tag or commit of --repo (default: its HEAD)')
    .option('--retention <duration>', 'keep each new session this long once finished (e.g. 7d; 0: forever)')
    .option('--tenant <name>', 'the tenant of new sessions: only the configured one (caller.tenant)')
    .option(
      '--priority <n>',
      'higher starts first under a fleet limit or a full fleet (-1000…caller.maxPriority, default 0)',
      parseIntegerOption('--priority', MIN_PRIORITY, MAX_PRIORITY),
    )
    .addOption(
      new Option(
        '--when-busy <strategy>',
        "a firing while the session's previous turn still runs: enqueue (wait, the default), interrupt, reject (the firing is recorded rejected_busy); as enqueue --when-busy",
      ).choices(WHEN_BUSY),
    )
    .option('--json', 'print the schedule as JSON')
    .action(async (prompt: string, flags: AddFlags) => {
      await addSchedule(prompt, flags);
    });

  schedule
    .command('list')
    .description('Every schedule with its timing, target, status, next run, last run and its outcome')
    .option('--json', 'print JSON')
    .action(async (flags: { json?: boolean }) => {
      await withClient(async (client) => {
        const schedules = await client.schedules.list();
        if (flags.json === true) printJson({ schedules });
        else if (schedules.length === 0) process.stdout.write('no schedule\n');
        else for (const s of schedules) process.stdout.write(`${line(s)}\n`);
      });
    });
  for (const [name, what] of [
    ['remove', 'Remove a schedule: it fires no more (a firing under way finishes); exit 3 for an unknown id'],
    ['pause', 'Pause a schedule: no firing until it is resumed; exit 3 for an unknown id, 1 for an ended one'],
    ['resume', 'Resume a paused schedule from its next tick (the ticks missed are not made up)'],
  ] as const)
    schedule
      .command(name)
      .description(what)
      .argument('<id>')
      .option('--json', 'print JSON')
      .action(async (id: string, flags: { json?: boolean }) => {
        await withClient(async (client) => {
          const result =
            name === 'remove'
              ? await client.schedules.remove(id)
              : name === 'pause'
                ? await client.schedules.pause(id)
                : await client.schedules.resume(id);
          if (flags.json === true) printJson(result);
          else if ('removed' in result) process.stdout.write(`removed schedule ${id}\n`);
          else process.stdout.write(`${line(result)}\n`);
        });
      });
  schedule
    .command('runs')
    .description("A schedule's last firings (at most 100), newest first: tick, outcome, session and turn")
    .argument('<id>')
    .option('--json', 'print JSON')
    .action(async (id: string, flags: { json?: boolean }) => {
      await withClient(async (client) => {
        const runs = await client.schedules.runs(id);
        if (flags.json === true) printJson({ id, runs });
        else if (runs.length === 0) process.stdout.write(`schedule ${id} has not fired yet\n`);
        else
          for (const r of runs)
            process.stdout.write(
              `${iso(r.tick)}  ${r.outcome}  ${r.sessionId ?? '-'}${r.turn === undefined ? '' : ` turn ${r.turn}`}${r.error === undefined ? '' : `  ${r.error}`}\n`,
            );
      });
    });
}

type Opened = Awaited<ReturnType<typeof openClient>>;

async function withClient(run: (client: Opened['client'], ctx: Opened) => Promise<void>): Promise<void> {
  const ctx = await openClient();
  try {
    await run(ctx.client, ctx);
  } catch (error) {
    throw scheduleError(error);
  } finally {
    await ctx.close();
  }
}

/** As a session command's errors, and a limit reached exits 1. */
function scheduleError(error: unknown): unknown {
  if (hasErrorCode(error, 'quota_exceeded')) return new CliError(error.message, ExitCode.failed);
  return sessionCommandError(error);
}

async function addSchedule(prompt: string, flags: AddFlags): Promise<void> {
  if ((flags.cron === undefined) === (flags.every === undefined))
    throw new CliError('give either --cron EXPR (with an optional --tz) or --every DURATION', ExitCode.usage);
  if ((flags.session === undefined) === (flags.new !== true))
    throw new CliError('give either --session ID or --new', ExitCode.usage);
  const options = turnOptionsFromFlags(flags);
  const retryPolicy = retryPatchFromFlags(flags);
  await withClient(async (client, ctx) => {
    // Issue 25: the tenant and the highest priority are the local caller's (config `caller`), not what a flag claims.
    const claimed = callerIssues(ctx.settings.caller, { tenant: flags.tenant, priority: flags.priority });
    if (claimed.length > 0)
      throw new CliError(claimed.map((i) => `--${i.field}: ${i.message}`).join('\n'), ExitCode.usage);
    const view = await client.schedules.add({
      prompt,
      ...(flags.id === undefined ? {} : { id: flags.id }),
      ...(flags.cron === undefined ? {} : { cron: flags.cron }),
      ...(flags.tz === undefined ? {} : { tz: flags.tz }),
      ...(flags.every === undefined ? {} : { every: flags.every }),
      ...(flags.session === undefined ? { new: true } : { sessionId: flags.session }),
      ...(Object.keys(options).length === 0 ? {} : { options }),
      ...(retryPolicy === undefined ? {} : { retryPolicy }),
      ...(flags.retention === undefined ? {} : { retention: flags.retention }),
      tenant: ctx.settings.caller.tenant,
      ...(flags.priority === undefined ? {} : { priority: flags.priority }),
      ...(flags.whenBusy === undefined ? {} : { whenBusy: flags.whenBusy }),
    });
    if (flags.json === true) printJson(view);
    else process.stdout.write(`${view.id}  next ${view.nextRunAt === null ? '-' : iso(view.nextRunAt)}\n`);
  });
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** One schedule on one line: id, timing, target, status, next run, last run and outcome. */
function line(s: ScheduleView): string {
  const timing =
    s.cron !== undefined ? `cron "${s.cron}"${s.tz === undefined ? '' : ` ${s.tz}`}` : `every ${s.everyMs} ms`;
  const target = s.sessionId === null ? 'new session each' : `session ${s.sessionId}`;
  const status = s.status === 'ended' ? `ended (${s.endedReason ?? 'unknown'})` : s.status;
  const last = s.lastRun === null ? 'never' : `${iso(s.lastRun.at)} ${s.lastRun.outcome}`;
  return `${s.id}  ${timing}  ${target}  ${status}  next ${s.nextRunAt === null ? '-' : iso(s.nextRunAt)}  last ${last}`;
}
