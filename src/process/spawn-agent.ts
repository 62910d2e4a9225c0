import { randomUUID } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { execa } from 'execa';
import { createAttemptCgroup, type AttemptCgroup } from './cgroup.ts';
import { IdleTimer } from './idle-timer.ts';
import { AGENT_MARKER_ENV, processStartTime } from './process-tree.ts';
import { describeCwdError, describeSpawnError, errorCode, errorText } from './spawn-error.ts';
import { StderrTail } from './stderr-tail.ts';
import { withoutSessiondEnv } from './sealed-env.ts';
import { readStdoutLines } from './stdout-lines.ts';
import { stopProcessTree } from './stop-process.ts';
import { planLaunch, readInitPid, readStatus, type Launch } from './sandbox/plan.ts';
import type { AgentProcess, ExitInfo, SpawnResult, SpawnSpec, StopReason } from './types.ts';

const DEFAULT_INTERRUPT_SIGNAL: NodeJS.Signals = 'SIGINT';
/**
 * Unique enough to tag one tree, and safe inside an env entry and as a cgroup's name (at most 255
 * bytes): room for sessiond's markers with the longest session id (runtime/orphans.ts).
 */
const VALID_MARKER = /^[A-Za-z0-9_.:-]{8,255}$/;

/**
 * Starts an agent: argv only (no shell), an explicit env (no `SESSIOND_*` entry) plus the tree
 * marker, its own process group, and its own cgroup where the host has cgroup containment.
 * Contract: never throws; a command that cannot start is `{ ok: false }` with a message naming it.
 */
export async function spawnAgent(spec: SpawnSpec): Promise<SpawnResult> {
  let launch: Launch | null = null;
  try {
    if (spec.cwd !== undefined) {
      const cwdError = await checkCwd(spec.command, spec.cwd);
      if (cwdError !== null) return cwdError;
    }
    const marker = spec.marker ?? randomUUID();
    if (!VALID_MARKER.test(marker)) {
      return {
        ok: false,
        error: `command ${JSON.stringify(spec.command)} was not started: invalid marker ${JSON.stringify(marker)}`,
        code: 'EINVAL',
      };
    }
    const planned = await planLaunch(spec);
    if (!planned.ok) return planned;
    launch = planned.launch;
    const started = launch;
    const cgroup = createAttemptCgroup(marker, spec.limits);
    // execa spawns synchronously: inside enter(), the child starts in the attempt's cgroup.
    const subprocess =
      cgroup === null
        ? startSubprocess(spec, started, marker)
        : cgroup.enter(() => startSubprocess(spec, started, marker));
    if (subprocess.pid === undefined) {
      await cgroup?.kill();
      await started.close();
      // Node reports a failed exec by leaving pid unset; execa's result (reject: false) says why.
      const result = await subprocess;
      const code = typeof result.code === 'string' ? result.code : undefined;
      const error = describeSpawnError(
        spec.command,
        code,
        result.originalMessage ?? result.shortMessage ?? 'unknown error',
      );
      return code === undefined ? { ok: false, error } : { ok: false, error, code };
    }
    const sandboxPipes = started.statusPipes
      ? { init: readInitPid(subprocess.stdio[3]), status: readStatus(subprocess.stdio[4]) }
      : null;
    const agent = createAgentProcess(subprocess, subprocess.pid, spec, marker, cgroup, started, sandboxPipes);
    agent.startTime = await processStartTime(agent.pid);
    if (sandboxPipes !== null) agent.interruptPid = (await sandboxPipes.init) ?? agent.pid;
    return { ok: true, agent };
  } catch (error) {
    await launch?.close();
    const code = errorCode(error);
    const message = describeSpawnError(spec.command, code, errorText(error));
    return code === undefined ? { ok: false, error: message } : { ok: false, error: message, code };
  }
}

async function checkCwd(command: string, cwd: string): Promise<SpawnResult | null> {
  try {
    if ((await stat(cwd)).isDirectory()) return null;
    return { ok: false, error: describeCwdError(command, cwd, 'ENOTDIR'), code: 'ENOTDIR' };
  } catch (error) {
    const code = errorCode(error);
    const message = describeCwdError(command, cwd, code);
    return code === undefined ? { ok: false, error: message } : { ok: false, error: message, code };
  }
}

/** Not async: the subprocess is a thenable that an `await` would run to completion. */
function startSubprocess(spec: SpawnSpec, launch: Launch, marker: string) {
  const stdin = spec.stdinMode === 'pipe' || spec.input !== undefined ? 'pipe' : 'ignore';
  return execa(launch.command, [...launch.args], {
    cwd: launch.cwd,
    env: { ...withoutSessiondEnv(launch.env), [AGENT_MARKER_ENV]: marker },
    extendEnv: false,
    shell: false,
    // Its own process group, so stage 3 can kill the group (execa's exit cleanup is off with it).
    detached: true,
    // In a bwrap sandbox, fd 3 carries bubblewrap's info and fd 4 the agent's exit status (sandbox/plan.ts).
    stdio: launch.statusPipes ? [stdin, 'pipe', 'pipe', 'pipe', 'pipe'] : [stdin, 'pipe', 'pipe'],
    buffer: false,
    encoding: 'buffer',
    reject: false,
    forceKillAfterDelay: false,
    stripFinalNewline: false,
    windowsHide: true,
  });
}

type Subprocess = ReturnType<typeof startSubprocess>;

type MutableAgentProcess = AgentProcess & { startTime: string | null; interruptPid: number };

interface SandboxPipes {
  status: Promise<{ exitCode: number | null; signal: NodeJS.Signals | null } | null>;
}

function createAgentProcess(
  subprocess: Subprocess,
  pid: number,
  spec: SpawnSpec,
  marker: string,
  cgroup: AttemptCgroup | null,
  launch: Launch,
  pipes: SandboxPipes | null,
): MutableAgentProcess {
  const noop = (): void => undefined;
  // A 'readable' listener keeps stdout in pull mode until lines() reads it: otherwise execa
  // (buffer: false) and Node (when the child exits) resume it and drop what nobody read yet.
  subprocess.stdout.on('readable', noop);
  // execa's own result settles only once stdio is closed; the exit itself is read from the 'exit' event.
  subprocess.then(noop, noop);
  subprocess.on('error', noop);
  subprocess.stdout.on('error', noop);
  subprocess.stderr.on('error', noop);
  subprocess.stdin?.on('error', noop);
  const keepsStdin = spec.stdinMode === 'pipe';
  if (!keepsStdin && subprocess.stdin) subprocess.stdin.end(spec.input ?? '');

  const tail = new StderrTail(spec.stderrTailBytes);
  subprocess.stderr.on('data', (chunk: Buffer) => tail.push(chunk));

  let exitInfo: ExitInfo | null = null;
  /** How the spawned process itself (bwrap, in a bubblewrap sandbox) ended: null until it was reaped. */
  let ownExit: { signal: NodeJS.Signals | null } | null = null;
  /** The sandbox's init reported the agent's exit (on its way out itself). */
  let reported = false;
  let stopReason: StopReason | null = null;
  let stopRun: Promise<void> | null = null;
  let linesTaken = false;

  const idle =
    spec.idleTimeoutMs !== undefined && spec.idleTimeoutMs > 0
      ? new IdleTimer(spec.idleTimeoutMs, () => void agent.stop('idle_timeout'))
      : null;
  idle?.resume();
  let holds = 0;
  let readerWaiting = true;

  const exited = new Promise<ExitInfo>((resolve) => {
    subprocess.once('exit', (exitCode: number | null, signal: NodeJS.Signals | null) => {
      ownExit = { signal };
      void (async () => {
        // In a sandbox, the agent's own exit (code or signal) is what its init reported.
        const status = pipes === null ? null : await pipes.status;
        reported = status !== null;
        exitInfo = status === null ? { exitCode, signal, stopReason } : { ...status, stopReason };
        idle?.cancel();
        void launch.close();
        resolve(exitInfo);
      })();
    });
  });

  const agent: MutableAgentProcess = {
    pid,
    marker,
    sandbox: launch.mode,
    startTime: null,
    interruptPid: pid,
    stdin: keepsStdin ? (subprocess.stdin ?? null) : null,
    exited,
    lines() {
      if (linesTaken) throw new Error('AgentProcess.lines() can be iterated only once');
      linesTaken = true;
      return readStdoutLines(subprocess.stdout, {
        exited,
        onWait: () => {
          readerWaiting = true;
          if (holds === 0) idle?.resume();
        },
        onWake: () => {
          readerWaiting = false;
          idle?.pause();
        },
      });
    },
    stderrTail: () => tail.text(),
    stop(reason: StopReason = 'requested') {
      if (stopRun !== null) return stopRun;
      if (exitInfo === null) stopReason = reason;
      idle?.cancel();
      stopRun = stopProcessTree({
        pid,
        interruptPid: agent.interruptPid,
        marker,
        startTime: agent.startTime,
        interruptSignal: spec.interruptSignal ?? DEFAULT_INTERRUPT_SIGNAL,
        stdin: subprocess.stdin ?? null,
        hasExited: () => exitInfo !== null,
        exited,
        cgroup,
        // The init reported the agent's exit and left; bwrap exits by itself only after it reaped that init (pid 1
        // of the agent's PID namespace, which every process of the tree is in: launch.ts), and the kernel completes
        // the exit of a namespace's init only once every other process of it is gone. Killed by a signal, bwrap
        // may have gone first (its init dies of --die-with-parent afterwards): swept then.
        treeGone: () => launch.mode === 'bwrap' && reported && ownExit !== null && ownExit.signal === null,
      });
      return stopRun;
    },
    holdIdle() {
      holds += 1;
      idle?.pause();
      let released = false;
      return () => {
        if (released) return;
        released = true;
        holds -= 1;
        if (holds === 0 && readerWaiting && exitInfo === null && stopRun === null) idle?.resume();
      };
    },
  };
  return agent;
}
