import { execa, type ResultPromise } from 'execa';
import { join } from 'node:path';
import { REPO_ROOT } from './pi-env.ts';

/** The sources as they are now (bin/sessiond-dev.mjs bundles them, cached by content): never a stale build. test/package/ runs the compiled bin. */
export const SESSIOND_BIN = join(REPO_ROOT, 'bin', 'sessiond-dev.mjs');

export interface CliResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** Runs `sessiond ARGS` as a user would: a separate process, through the dev bin (the same main as the package's) unless `bin` names another. */
export function sessiond(
  args: readonly string[],
  options: { input?: string; env?: Record<string, string>; cwd?: string; bin?: string } = {},
): ResultPromise {
  return execa(process.execPath, [options.bin ?? SESSIOND_BIN, ...args], {
    reject: false,
    cwd: options.cwd ?? REPO_ROOT,
    env: options.env ?? {},
    ...(options.input === undefined ? { stdin: 'ignore' as const } : { input: options.input }),
    timeout: 120_000,
    stripFinalNewline: false,
  });
}

export async function runCli(
  args: readonly string[],
  options: Parameters<typeof sessiond>[1] = {},
): Promise<CliResult> {
  const result = await sessiond(args, options);
  return { exitCode: result.exitCode ?? -1, stdout: String(result.stdout), stderr: String(result.stderr) };
}

export function jsonLines(text: string): Array<{ type: string; content: Record<string, unknown> }> {
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as { type: string; content: Record<string, unknown> });
}
