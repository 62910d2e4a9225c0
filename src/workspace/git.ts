import { spawn } from 'node:child_process';
import { execa } from 'execa';

/**
 * Host-side git with nothing a workspace (or anyone but sessiond) configures.
 * Contract: argv only (no shell); no system or global config, HOME an empty directory of sessiond's;
 * no hooks, fsmonitor, external diff or textconv; the repository whose config git reads is always
 * sessiond's own private one (a workspace's `.git` is only ever a work tree or a clone target whose
 * config sessiond just wrote), so filter and diff drivers named by a workspace's `.gitattributes`
 * have no definition and never run; transports limited to file, git, ssh and https.
 */

/** `-c` settings on every call. */
const SAFE_CONFIG: readonly string[] = [
  'core.hooksPath=/dev/null',
  'core.fsmonitor=false',
  'core.attributesFile=/dev/null',
  'core.autocrlf=false',
  'core.safecrlf=false',
  'core.symlinks=true',
  'core.quotePath=false',
  'core.pager=cat',
  'core.sparseCheckout=false',
  'credential.helper=',
  'diff.external=',
  'gc.auto=0',
  'maintenance.auto=false',
  'advice.addEmbeddedRepo=false',
  'advice.detachedHead=false',
  'init.defaultBranch=main',
  'user.name=sessiond',
  'user.email=sessiond@localhost',
  'protocol.allow=never',
  'protocol.file.allow=always',
  'protocol.git.allow=always',
  'protocol.ssh.allow=always',
  'protocol.https.allow=always',
  'submodule.recurse=false',
  'fetch.recurseSubmodules=false',
  // sessiond reads only its own config: ownership checks of the work trees add nothing but refusals.
  'safe.directory=*',
].flatMap((setting) => ['-c', setting]);

/** Most bytes of output (stdout and stderr) a git call may print. */
const MAX_OUTPUT = 512 * 1024 * 1024;

export interface GitCall {
  /** GIT_DIR (sessiond's private repository), when the call has one. */
  readonly gitDir?: string;
  readonly workTree?: string;
  readonly indexFile?: string;
  readonly cwd?: string;
  readonly input?: string | Buffer;
  /** Extra `-c` settings for this call (e.g. core.excludesFile). */
  readonly config?: readonly string[];
}

export interface GitResult {
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** A git command that failed: its argv (no secrets: sessiond's git argv holds none) and stderr's tail. */
export class GitError extends Error {
  override readonly name = 'GitError';
  constructor(
    readonly args: readonly string[],
    readonly exitCode: number,
    readonly stderr: string,
  ) {
    super(`git ${args.slice(0, 3).join(' ')} failed (exit ${exitCode}): ${tail(stderr)}`);
  }
}

export function tail(text: string, max = 600): string {
  const trimmed = text.trim();
  return trimmed.length <= max ? trimmed : `…${trimmed.slice(-max)}`;
}

export class Git {
  constructor(private readonly home: string) {}

  env(call: GitCall): Record<string, string> {
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: this.home,
      XDG_CONFIG_HOME: this.home,
      LC_ALL: 'C',
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: '/dev/null',
      GIT_ATTR_NOSYSTEM: '1',
      GIT_TERMINAL_PROMPT: '0',
      GIT_NO_REPLACE_OBJECTS: '1',
      GIT_AUTHOR_NAME: 'sessiond',
      GIT_AUTHOR_EMAIL: 'sessiond@localhost',
      GIT_COMMITTER_NAME: 'sessiond',
      GIT_COMMITTER_EMAIL: 'sessiond@localhost',
    };
    // An ssh store authenticates with the deployment's agent, when it has one.
    if (process.env.SSH_AUTH_SOCK !== undefined) env.SSH_AUTH_SOCK = process.env.SSH_AUTH_SOCK;
    if (call.gitDir !== undefined) env.GIT_DIR = call.gitDir;
    if (call.workTree !== undefined) env.GIT_WORK_TREE = call.workTree;
    if (call.indexFile !== undefined) env.GIT_INDEX_FILE = call.indexFile;
    return env;
  }

  /**
   * Runs git; resolves with its result whatever the exit code. A bare `spawn` rather than execa: a
   * snapshot is a few short git processes, and execa's own work cost about as much CPU as starting
   * one. No exit cleanup either (as execa's was turned off: its signal-exit re-raised a SIGTERM or
   * SIGINT once it saw no other listener, and the worker's own, `process.once`, had just gone as it
   * ran: the worker died in the middle of its graceful shutdown). A git call left running when the
   * worker exits ends by itself (as after a kill -9).
   */
  try(args: readonly string[], call: GitCall = {}): Promise<GitResult> {
    const extra = (call.config ?? []).flatMap((setting) => ['-c', setting]);
    const argv = [...SAFE_CONFIG, ...extra, ...args];
    return new Promise((resolve, reject) => {
      const child = spawn('git', argv, {
        env: this.env(call),
        cwd: call.cwd ?? this.home,
        stdio: [call.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
      });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      let bytes = 0;
      const collect = (into: Buffer[]) => (chunk: Buffer) => {
        bytes += chunk.length;
        if (bytes > MAX_OUTPUT) {
          child.kill('SIGKILL');
          return;
        }
        into.push(chunk);
      };
      child.stdout?.on('data', collect(out));
      child.stderr?.on('data', collect(err));
      child.once('error', (error) => {
        reject(new Error(`git ${args.slice(0, 3).join(' ')} could not run: ${error.message}`));
      });
      child.once('close', (code, signal) => {
        if (bytes > MAX_OUTPUT) {
          reject(new Error(`git ${args.slice(0, 3).join(' ')}: output over ${MAX_OUTPUT} bytes`));
          return;
        }
        if (code === null) {
          reject(new Error(`git ${args.slice(0, 3).join(' ')} could not run: killed by ${signal ?? 'a signal'}`));
          return;
        }
        resolve({
          exitCode: code,
          stdout: Buffer.concat(out).toString('utf8'),
          stderr: Buffer.concat(err).toString('utf8'),
        });
      });
      if (call.input !== undefined && child.stdin !== null) {
        // git may exit before it read all of its input (its error then says why): EPIPE is not the failure.
        child.stdin.on('error', () => undefined);
        child.stdin.end(call.input);
      }
    });
  }

  /** Runs git; rejects with GitError on a non-zero exit. Resolves with stdout. */
  async run(args: readonly string[], call: GitCall = {}): Promise<string> {
    const result = await this.try(args, call);
    if (result.exitCode !== 0) throw new GitError(args, result.exitCode, result.stderr);
    return result.stdout;
  }
}

/** This host's git as sessiond's workspaces run it (PATH only, nothing configured): its version, or why it cannot run. */
export async function probeGit(): Promise<{ ok: true; version: string } | { ok: false; reason: string }> {
  const result = await execa('git', ['--version'], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      LC_ALL: 'C',
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: '/dev/null',
    },
    extendEnv: false,
    reject: false,
    stdin: 'ignore',
  });
  if (result.exitCode === 0) return { ok: true, version: String(result.stdout).trim() };
  const missing = (result as { code?: string }).code === 'ENOENT';
  return {
    ok: false,
    reason: missing
      ? `git was not found on PATH (${process.env.PATH ?? ''})`
      : `git --version failed${result.exitCode === undefined ? '' : ` (exit ${result.exitCode})`}: ${tail(String(result.stderr) || (result.message ?? ''))}`,
  };
}
