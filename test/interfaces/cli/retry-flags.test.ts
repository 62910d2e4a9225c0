import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import {
  addRetryPolicyOptions,
  retryPatchFromFlags,
  type RetryFlags,
} from '../../../src/interfaces/cli/retry-flags.ts';

function patchOf(args: string[]): Record<string, unknown> | undefined {
  const command = addRetryPolicyOptions(new Command('x').exitOverride(), 'test');
  command.parse(args, { from: 'user' });
  return retryPatchFromFlags(command.opts<RetryFlags>());
}

describe('the quota-wall flags', () => {
  it('--retry-rate-limit-attempts and --retry-max-park become rateLimitAttempts and maxParkMs', () => {
    expect(patchOf(['--retry-rate-limit-attempts', 'counted', '--retry-max-park', '6h'])).toEqual({
      rateLimitAttempts: 'counted',
      maxParkMs: 21_600_000,
    });
  });

  it('a bad mode is refused, naming the flag', () => {
    expect(() => patchOf(['--retry-rate-limit-attempts', 'sometimes'])).toThrow(
      /--retry-rate-limit-attempts must be free or counted/,
    );
  });
});

describe('the workspace flag', () => {
  it('--retry-workspace rollback becomes workspace: "rollback"; another value is refused, naming the flag', () => {
    expect(patchOf(['--retry-workspace', 'rollback'])).toEqual({ workspace: 'rollback' });
    expect(() => patchOf(['--retry-workspace', 'undo'])).toThrow(/--retry-workspace must be keep or rollback/);
  });
});
