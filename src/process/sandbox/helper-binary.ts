import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { HELPER_SOURCE } from './helper-source.ts';

/** The helper built from HELPER_SOURCE, or why there is none. */
export type HelperBinary = { ok: true; path: string } | { ok: false; reason: string };

const COMPILERS = ['cc', 'gcc', 'clang'];

/** Where built helpers are kept: $SESSIOND_SANDBOX_CACHE, else $XDG_CACHE_HOME/sessiond, else ~/.cache/sessiond. */
export function helperCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const explicit = env.SESSIOND_SANDBOX_CACHE;
  if (explicit !== undefined && explicit !== '') return explicit;
  const xdg = env.XDG_CACHE_HOME;
  return join(xdg !== undefined && xdg !== '' ? xdg : join(homedir(), '.cache'), 'sessiond');
}

let built: HelperBinary | undefined;

/**
 * The helper binary, compiled on first use with the host's C compiler (cc, gcc or clang) into the
 * cache dir, named by the source's hash (a changed source is rebuilt). Synchronous, once per process.
 * Contract: never throws; `{ ok: false }` says why there is no helper (no compiler, a build error).
 */
export function helperBinary(): HelperBinary {
  built ??= build();
  return built;
}

function build(): HelperBinary {
  const hash = createHash('sha256').update(HELPER_SOURCE).digest('hex').slice(0, 16);
  const dir = helperCacheDir();
  const path = join(dir, `sandbox-helper-${hash}`);
  if (existsSync(path)) return { ok: true, path };
  const source = join(dir, `sandbox-helper-${hash}.${process.pid}.c`);
  const temp = `${path}.${process.pid}.tmp`;
  const errors: string[] = [];
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    writeFileSync(source, HELPER_SOURCE);
    for (const compiler of COMPILERS) {
      try {
        // Static where the host has a static libc: the init starts once per attempt, and a static one
        // skips the dynamic loader (~0.2 ms of CPU per attempt, measured).
        try {
          execFileSync(compiler, ['-O2', '-static', '-o', temp, source], { stdio: 'ignore', timeout: 60_000 });
        } catch {
          // No static libc (or no compiler: the dynamic build below says which).
          execFileSync(compiler, ['-O2', '-o', temp, source], { stdio: ['ignore', 'ignore', 'pipe'], timeout: 60_000 });
        }
        chmodSync(temp, 0o755);
        renameSync(temp, path);
        return { ok: true, path };
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        errors.push(
          code === 'ENOENT'
            ? `${compiler}: not installed`
            : `${compiler}: ${
                String((error as { stderr?: Buffer }).stderr ?? (error as Error).message)
                  .trim()
                  .split('\n')[0] ?? ''
              }`,
        );
      }
    }
    return { ok: false, reason: `the sandbox helper could not be built (${errors.join('; ')})` };
  } catch (error) {
    return { ok: false, reason: `the sandbox helper could not be built in ${dir}: ${(error as Error).message}` };
  } finally {
    rmSync(source, { force: true });
    rmSync(temp, { force: true });
  }
}
