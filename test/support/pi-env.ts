/**
 * An isolated environment for running the real `pi` CLI against the fake model server:
 * a temp HOME, agent dir (models.json + settings.json), session dir and cwd, plus helpers to
 * build pi's argv and to run it (stdin at EOF, optional signal after a delay).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BUILTIN_MODEL_IDS } from './fake-model-server.ts';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** `node_modules/.bin/pi` of this repo (pi 0.73.1). */
export const piBin = join(REPO_ROOT, 'node_modules', '.bin', 'pi');

export const FAKE_PROVIDER = 'fake';
export const FAKE_API_KEY = 'fake-key-not-secret';
export const NO_RETRY_SETTINGS = { retry: { enabled: false, provider: { maxRetries: 0 } } } as const;

export interface PiEnvOptions {
  /** Base URL of the fake server, e.g. `http://127.0.0.1:1234/v1`. */
  serverUrl: string;
  /** false (default): settings.json disables agent-level and SDK-level retries. true: pi defaults. */
  retries?: boolean;
  /** Written as settings.json instead of the retries default (wins over `retries`). */
  settings?: Record<string, unknown>;
  /** Model ids to declare (default: every built-in id). Ids in `reasoningModels` get `reasoning: true`. */
  models?: readonly string[];
  reasoningModels?: readonly string[];
  /** Extra model ids declared in addition to `models` (e.g. ids scripted with setScript). */
  extraModels?: readonly string[];
  /** Extra env vars (merged last). */
  env?: Record<string, string>;
  /** Use this directory as the root (deleted and recreated) instead of a fresh mkdtemp dir. */
  root?: string;
}

export interface PiEnv {
  root: string;
  agentDir: string;
  sessionDir: string;
  cwd: string;
  home: string;
  env: Record<string, string>;
  cleanup(): void;
}

export function modelsJson(serverUrl: string, models: readonly string[], reasoningModels: readonly string[]): unknown {
  return {
    providers: {
      [FAKE_PROVIDER]: {
        baseUrl: serverUrl,
        api: 'openai-completions',
        apiKey: FAKE_API_KEY,
        compat: { supportsDeveloperRole: false, supportsReasoningEffort: false },
        models: models.map((id) => (reasoningModels.includes(id) ? { id, reasoning: true } : { id })),
      },
    },
  };
}

/**
 * The root dir of a test environment: `explicit` emptied (deleted and recreated), or a fresh temp
 * dir named after `prefix`. Shared by the agents' env factories.
 */
/** pi flags that keep a test run from loading the host's extensions, skills, prompt templates and context files. */
export const NO_DISCOVERY = ['--no-extensions', '--no-skills', '--no-prompt-templates', '--no-context-files'];

export function envRoot(explicit: string | undefined, prefix: string): string {
  if (explicit === undefined) return mkdtempSync(join(tmpdir(), prefix));
  const root = resolve(explicit);
  rmSync(root, { recursive: true, force: true });
  mkdirSync(root, { recursive: true });
  return root;
}

export function createPiEnv(options: PiEnvOptions): PiEnv {
  const root = envRoot(options.root, 'pi-env-');
  const home = join(root, 'home');
  const agentDir = join(root, 'agent');
  const sessionDir = join(root, 'sessions');
  const cwd = join(root, 'work');
  for (const d of [home, agentDir, sessionDir, cwd]) mkdirSync(d, { recursive: true });

  const models = [...(options.models ?? BUILTIN_MODEL_IDS), ...(options.extraModels ?? [])];
  const reasoning = options.reasoningModels ?? ['thinking'];
  writeFileSync(
    join(agentDir, 'models.json'),
    `${JSON.stringify(modelsJson(options.serverUrl, models, reasoning), null, 2)}\n`,
  );
  const settings = options.settings ?? (options.retries ? undefined : NO_RETRY_SETTINGS);
  if (settings !== undefined) writeFileSync(join(agentDir, 'settings.json'), `${JSON.stringify(settings, null, 2)}\n`);

  // A minimal env: nothing from the parent except PATH/locale, so no real keys or pi dirs leak in.
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: home,
    TMPDIR: tmpdir(),
    LANG: process.env.LANG ?? 'C.UTF-8',
    PI_OFFLINE: '1',
    PI_CODING_AGENT_DIR: agentDir,
    PI_TELEMETRY: '0',
    ...(options.env ?? {}),
  };
  return {
    root,
    agentDir,
    sessionDir,
    cwd,
    home,
    env,
    cleanup: () => rmSync(root, { recursive: true, force: true }),
  };
}

export interface PiArgsOptions {
  model: string;
  prompt: string;
  /**
   * `none` (default): `--no-session`.
   * `{ dir }`: `--session-dir <dir>` (a new session is created and saved there).
   * `{ dir, id }`: `--session-dir <dir> --session <id>` (resume; id may be a unique prefix or a file path).
   */
  session?: 'none' | { dir: string; id?: string };
  mode?: 'json' | 'text';
  extra?: readonly string[];
}

/** The argv used in the recordings (without the `pi` binary itself). */
export function piArgs(o: PiArgsOptions): string[] {
  const args = o.mode === 'text' ? ['-p'] : ['--mode', 'json', '-p'];
  if (o.session === undefined || o.session === 'none') args.push('--no-session');
  else {
    args.push('--session-dir', o.session.dir);
    if (o.session.id !== undefined) args.push('--session', o.session.id);
  }
  args.push(...NO_DISCOVERY);
  args.push('--provider', FAKE_PROVIDER, '--model', o.model);
  args.push(...(o.extra ?? []));
  args.push(o.prompt);
  return args;
}

export interface RunPiOptions {
  env: PiEnv;
  args: string[];
  /** Send `signal` this many ms after spawn, or when `signalWhen` first returns true. */
  signal?: NodeJS.Signals;
  signalAfterMs?: number;
  /** Called with each complete stdout line; return true to send `signal` now. */
  signalWhen?: (line: string) => boolean;
  /** Extra delay between signalWhen matching and the signal. Default 0. */
  signalDelayMs?: number;
  /** SIGKILL the process after this many ms (safety net). Default 60 000. */
  timeoutMs?: number;
  /** Called once with the pid right after spawn. */
  onSpawn?: (pid: number) => void;
  /** Called synchronously right before the signal is sent (e.g. to snapshot the process tree). */
  beforeSignal?: (pid: number) => void;
}

export interface PiRun {
  stdout: string;
  stderr: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Status as a shell reports it: code, or 128 + signal number. */
  shellStatus: number;
  pid: number;
  durationMs: number;
  /** ms since spawn when the signal was sent, if any. */
  signalSentAtMs?: number;
  timedOut: boolean;
  /** stdout parsed as JSON lines (non-JSON lines are skipped). */
  events: PiEvent[];
  /** ms since spawn at which each stdout line arrived, with the event type (or `?`). */
  timeline: { ms: number; what: string }[];
}

export interface PiEvent {
  type: string;
  [key: string]: unknown;
}

const SIGNAL_NUMBERS: Partial<Record<NodeJS.Signals, number>> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGKILL: 9,
  SIGTERM: 15,
};

export function parseEvents(stdout: string): PiEvent[] {
  const out: PiEvent[] = [];
  for (const line of stdout.split('\n')) {
    if (!line.trim()) continue;
    try {
      const v = JSON.parse(line) as unknown;
      if (v && typeof v === 'object' && typeof (v as PiEvent).type === 'string') out.push(v as PiEvent);
    } catch {
      // not JSON
    }
  }
  return out;
}

/** Runs pi with stdin at EOF (`'ignore'`), in env.cwd with env.env. */
export function runPi(o: RunPiOptions): Promise<PiRun> {
  return new Promise((resolvePromise, reject) => {
    const started = Date.now();
    const child = spawn(piBin, o.args, { cwd: o.env.cwd, env: o.env.env, stdio: ['ignore', 'pipe', 'pipe'] });
    if (child.pid === undefined) {
      child.once('error', reject);
      return;
    }
    const pid = child.pid;
    o.onSpawn?.(pid);
    let stdout = '';
    let stderr = '';
    let pending = '';
    let signalSentAtMs: number | undefined;
    let timedOut = false;
    const timers: NodeJS.Timeout[] = [];
    const timeline: { ms: number; what: string }[] = [];
    const sendSignal = (): void => {
      if (signalSentAtMs !== undefined || !o.signal || child.exitCode !== null || child.signalCode !== null) return;
      o.beforeSignal?.(pid);
      signalSentAtMs = Date.now() - started;
      timeline.push({ ms: signalSentAtMs, what: `send ${o.signal}` });
      child.kill(o.signal);
    };
    if (o.signal && o.signalAfterMs !== undefined) timers.push(setTimeout(sendSignal, o.signalAfterMs));
    timers.push(
      setTimeout(() => {
        timedOut = true;
        child.kill('SIGKILL');
      }, o.timeoutMs ?? 60_000),
    );
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    child.stdout.on('data', (d: string) => {
      stdout += d;
      pending += d;
      let nl: number;
      while ((nl = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        timeline.push({ ms: Date.now() - started, what: `stdout ${parseEvents(line)[0]?.type ?? '?'}` });
        if (o.signalWhen && signalSentAtMs === undefined && o.signalWhen(line)) {
          if (o.signalDelayMs) timers.push(setTimeout(sendSignal, o.signalDelayMs));
          else sendSignal();
        }
      }
    });
    child.stderr.on('data', (d: string) => {
      stderr += d;
    });
    child.once('error', reject);
    child.once('close', (code, signal) => {
      for (const t of timers) clearTimeout(t);
      timeline.push({ ms: Date.now() - started, what: `exit code=${code} signal=${signal}` });
      resolvePromise({
        stdout,
        stderr,
        code,
        signal,
        shellStatus: code ?? 128 + (signal ? (SIGNAL_NUMBERS[signal] ?? 0) : 0),
        pid,
        durationMs: Date.now() - started,
        ...(signalSentAtMs !== undefined ? { signalSentAtMs } : {}),
        timedOut,
        events: parseEvents(stdout),
        timeline,
      });
    });
  });
}

/** The session id from the first (`type: "session"`) line of a json-mode run. */
export function sessionIdOf(run: Pick<PiRun, 'events'>): string | undefined {
  const header = run.events.find((e) => e.type === 'session');
  return typeof header?.id === 'string' ? header.id : undefined;
}

/** Session files in `sessionDir` whose name ends with `_<id>.jsonl` (pi names them `<iso-ts>_<id>.jsonl`). */
export function findSessionFiles(sessionDir: string, id?: string): string[] {
  let names: string[];
  try {
    names = readdirSync(sessionDir);
  } catch {
    return [];
  }
  return names
    .filter((n) => n.endsWith('.jsonl') && (id === undefined || n.endsWith(`_${id}.jsonl`)))
    .sort()
    .map((n) => join(sessionDir, n));
}
