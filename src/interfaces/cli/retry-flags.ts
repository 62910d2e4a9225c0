import type { Command } from 'commander';
import { Option } from 'commander';
import { FAILURE_CATEGORIES } from '../../protocol/failure-categories.ts';
import { parseDurationOption, parseIntegerOption } from './parse-options.ts';
import { InvalidArgumentError } from 'commander';

export interface RetryFlags {
  retry?: boolean;
  retryMaxAttempts?: number;
  retryInitialDelay?: number;
  retryMaxDelay?: number;
  retryMultiplier?: number;
  retryJitter?: string | number;
  retryOn?: string[];
  retryHonorRetryAfter?: boolean;
  retryMaxTurn?: number;
  retryRateLimitAttempts?: 'free' | 'counted';
  retryMaxPark?: number;
  retryWorkspace?: 'keep' | 'rollback';
}

function parseWorkspaceMode(value: string): 'keep' | 'rollback' {
  if (value === 'keep' || value === 'rollback') return value;
  throw new InvalidArgumentError(`--retry-workspace must be keep or rollback (got "${value}")`);
}

function parseRateLimitAttempts(value: string): 'free' | 'counted' {
  if (value === 'free' || value === 'counted') return value;
  throw new InvalidArgumentError(`--retry-rate-limit-attempts must be free or counted (got "${value}")`);
}

function parseMultiplier(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 1 || n > 10)
    throw new InvalidArgumentError(`--retry-multiplier must be a number from 1 to 10 (got "${value}")`);
  return n;
}

function parseJitter(value: string): string | number {
  if (value === 'none' || value === 'full' || value === 'equal') return value;
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n < 0 || n > 1)
    throw new InvalidArgumentError(`--retry-jitter must be none, full, equal or a factor from 0 to 1 (got "${value}")`);
  return n;
}

function parseCategories(value: string): string[] {
  const list = value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  for (const c of list) {
    if (!(FAILURE_CATEGORIES as readonly string[]).includes(c))
      throw new InvalidArgumentError(
        `--retry-on: "${c}" is not a failure category (one of ${FAILURE_CATEGORIES.join(', ')})`,
      );
  }
  return list;
}

/** The retry policy's fields as flags (the same names for `enqueue` and `retry-policy set`). */
export function addRetryPolicyOptions(command: Command, what: string): Command {
  return command
    .option('--no-retry', `${what}: never retry`)
    .option(
      '--retry-max-attempts <n>',
      `${what}: attempts per turn, the first included (1-100)`,
      parseIntegerOption('--retry-max-attempts', 1, 100),
    )
    .option(
      '--retry-initial-delay <duration>',
      `${what}: first backoff (e.g. 500ms, 2s)`,
      parseDurationOption('--retry-initial-delay'),
    )
    .option('--retry-max-delay <duration>', `${what}: backoff cap (e.g. 1m)`, parseDurationOption('--retry-max-delay'))
    .option('--retry-multiplier <x>', `${what}: backoff growth factor (1-10)`, parseMultiplier)
    .option('--retry-jitter <mode>', `${what}: none, full, equal or a factor 0-1`, parseJitter)
    .option('--retry-on <categories>', `${what}: comma-separated failure categories to retry`, parseCategories)
    .addOption(new Option('--retry-honor-retry-after', `${what}: let a longer Retry-After win`))
    .addOption(new Option('--no-retry-honor-retry-after', `${what}: ignore Retry-After`))
    .option(
      '--retry-max-turn <duration>',
      `${what}: wall-clock limit of a turn, attempts and backoffs included (e.g. 30m; 0: none)`,
      parseDurationOption('--retry-max-turn'),
    )
    .option(
      '--retry-rate-limit-attempts <mode>',
      `${what}: free or counted — whether an attempt that hits a quota wall counts against the attempts`,
      parseRateLimitAttempts,
    )
    .option(
      '--retry-max-park <duration>',
      `${what}: the longest park at a quota wall (e.g. 6h; 0: never park)`,
      parseDurationOption('--retry-max-park'),
    )
    .option(
      '--retry-workspace <mode>',
      `${what}: keep or rollback — what a failed attempt leaves in the session's workspace for the retry`,
      parseWorkspaceMode,
    );
}

/** The policy patch the flags ask for, or undefined when none was given. */
export function retryPatchFromFlags(flags: RetryFlags): Record<string, unknown> | undefined {
  const patch: Record<string, unknown> = {};
  if (flags.retry === false) patch.enabled = false;
  if (flags.retryMaxAttempts !== undefined) patch.maxAttempts = flags.retryMaxAttempts;
  if (flags.retryInitialDelay !== undefined) patch.initialDelayMs = flags.retryInitialDelay;
  if (flags.retryMaxDelay !== undefined) patch.maxDelayMs = flags.retryMaxDelay;
  if (flags.retryMultiplier !== undefined) patch.multiplier = flags.retryMultiplier;
  if (flags.retryJitter !== undefined) patch.jitter = flags.retryJitter;
  if (flags.retryOn !== undefined) patch.retryOn = flags.retryOn;
  if (flags.retryHonorRetryAfter !== undefined) patch.honorRetryAfter = flags.retryHonorRetryAfter;
  if (flags.retryMaxTurn !== undefined) patch.maxTurnMs = flags.retryMaxTurn;
  if (flags.retryRateLimitAttempts !== undefined) patch.rateLimitAttempts = flags.retryRateLimitAttempts;
  if (flags.retryMaxPark !== undefined) patch.maxParkMs = flags.retryMaxPark;
  if (flags.retryWorkspace !== undefined) patch.workspace = flags.retryWorkspace;
  return Object.keys(patch).length === 0 ? undefined : patch;
}
