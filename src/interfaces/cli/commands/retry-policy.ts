import type { Command } from 'commander';
import type { RetryPolicy } from '../../../retry/index.ts';
import { CliError } from '../cli-error.ts';
import type { RetryPolicyClient } from '../../../api/client.ts';
import { ExitCode } from '../exit-codes.ts';
import { formatMs, printJson } from '../present.ts';
import { addRetryPolicyOptions, retryPatchFromFlags, type RetryFlags } from '../retry-flags.ts';
import { hasErrorCode } from '../../../errors.ts';
import { openClient } from '../open-client.ts';

export function registerRetryPolicy(program: Command): void {
  const policy = program
    .command('retry-policy')
    .description("Show or change the retry policy: the global default, or one session's (--session)");

  policy
    .command('get')
    .option('--session <id>', "this session's policy")
    .option('--json', 'one JSON object')
    .action(async (flags: { session?: string; json?: boolean }) =>
      withRetryPolicy(async (retryPolicy) => {
        const { policy: p, source } = await retryPolicy.get(sessionOption(flags.session));
        if (flags.json === true) printJson({ ...p, source });
        else process.stdout.write(render(p, source));
      }),
    );

  const set = policy
    .command('set')
    .description(
      'Change fields of the retry policy; a bad value is refused with its field and range, and nothing is changed',
    )
    .option('--session <id>', "change this session's policy");
  addRetryPolicyOptions(set, 'policy');
  set
    .option('--json', 'print the new policy as JSON')
    .action(async (flags: RetryFlags & { session?: string; json?: boolean }) =>
      withRetryPolicy(async (retryPolicy) => {
        const patch = retryPatchFromFlags(flags);
        if (patch === undefined)
          throw new CliError(
            'retry-policy set: give at least one field, e.g. --retry-max-attempts 5 (see --help)',
            ExitCode.usage,
          );
        const result = await retryPolicy.set(patch, sessionOption(flags.session));
        if (!result.ok)
          throw new CliError(
            `retry policy not changed: ${result.errors.map((e) => `${e.field}: ${e.message}`).join('; ')}`,
            ExitCode.usage,
          );
        if (flags.json === true) printJson(result.policy);
        else process.stdout.write(render(result.policy, flags.session === undefined ? 'global' : 'session'));
      }),
    );

  policy
    .command('reset')
    .option('--session <id>', "drop this session's own policy (it follows the global one again)")
    .action(async (flags: { session?: string }) =>
      withRetryPolicy(async (retryPolicy) => {
        const p = await retryPolicy.reset(sessionOption(flags.session));
        process.stdout.write(render(p, flags.session === undefined ? 'default' : 'global'));
      }),
    );
}

function sessionOption(sessionId: string | undefined): { sessionId?: string } {
  return sessionId === undefined ? {} : { sessionId };
}

async function withRetryPolicy(fn: (retryPolicy: RetryPolicyClient) => Promise<void>): Promise<void> {
  const ctx = await openClient();
  try {
    await fn(ctx.client.retryPolicy);
  } catch (error) {
    if (hasErrorCode(error, 'not_found')) throw new CliError(error.message, ExitCode.notFound);
    throw error;
  } finally {
    await ctx.close();
  }
}

function render(p: RetryPolicy, source: string): string {
  return [
    `retry policy (${source})`,
    `  enabled          ${p.enabled}`,
    `  maxAttempts      ${p.maxAttempts}`,
    `  initialDelay     ${formatMs(p.initialDelayMs)}`,
    `  multiplier       ${p.multiplier}`,
    `  maxDelay         ${formatMs(p.maxDelayMs)}`,
    `  jitter           ${p.jitter}`,
    `  retryOn          ${p.retryOn.join(', ')}`,
    `  honorRetryAfter  ${p.honorRetryAfter} (cap ${formatMs(p.maxRetryAfterMs)})`,
    `  maxTurn          ${(p.maxTurnMs ?? 0) > 0 ? formatMs(p.maxTurnMs) : 'none'}`,
    `  quota walls      parked up to ${formatMs(p.maxParkMs ?? 86_400_000)}, attempts ${p.rateLimitAttempts ?? 'free'}`,
    `  workspace        ${p.workspace ?? 'keep'} (what a failed attempt leaves for the retry)`,
    '',
  ].join('\n');
}
