/**
 * Records real `gemini` (0.61.0) runs against the fake Gemini API into test/fixtures/gemini/.
 *
 *   node --import tsx test/agents/gemini/record-transcripts.ts           # every scenario
 *   node --import tsx test/agents/gemini/record-transcripts.ts sig tool  # names containing "sig" or "tool"
 *
 * Per scenario: `<name>.stdout.jsonl` (byte for byte), `<name>.stderr.txt`, `<name>.exit` (exit code,
 * or the signal name) and `<name>.meta.json` (command line, requests the fake API received, timeline,
 * signal, processes left behind). See test/fixtures/gemini/README.md.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { findProcessesByMarker, killProcessTree, AGENT_MARKER_ENV } from '../../../src/process/index.ts';
import {
  declaredTools,
  functionResponses,
  startFakeGeminiServer,
  userTexts,
  type FakeGeminiServer,
} from '../../support/fake-gemini-server.ts';
import { FAKE_API_KEY, geminiBin, RECORDING_SETTINGS, REPO_ROOT } from './gemini-env.ts';

const OUT_DIR = join(REPO_ROOT, 'test', 'fixtures', 'gemini');
/** Fixed root so that the paths gemini prints are the same on every recording. */
const REC_ROOT = '/tmp/sessiond-gemini-rec';

interface Scenario {
  name: string;
  model: string;
  prompt: string;
  args?: string[];
  /** Replaces the recording settings.json. */
  settings?: Record<string, unknown>;
  /** Variables removed from / added to the environment. */
  envDrop?: string[];
  envAdd?: Record<string, string>;
  /** Sends the signal once a line matching `after` was printed, `delayMs` later. */
  signal?: { name: NodeJS.Signals; after: RegExp; delayMs: number };
  /** Runs first in the same home (not saved), e.g. the turn a resume continues. */
  before?: { model: string; prompt: string };
  /** `--resume` the session of `before`. */
  resumeBefore?: boolean;
  note?: string;
}

const YOLO = ['--approval-mode', 'yolo'];

const SCENARIOS: Scenario[] = [
  { name: 'text', model: 'fake-text', prompt: 'Say hello' },
  {
    name: 'thinking',
    model: 'fake-thinking',
    prompt: 'Say hello',
    note: 'two thought parts, then text: the thoughts never reach stdout',
  },
  { name: 'tool', model: 'fake-tool', prompt: 'Run echo hi', args: YOLO },
  {
    name: 'tool-default-mode',
    model: 'fake-tool',
    prompt: 'Run echo hi',
    note: 'default approval mode: run_shell_command is not registered',
  },
  {
    name: 'tool-auto-edit',
    model: 'fake-tool',
    prompt: 'Run echo hi',
    args: ['--approval-mode', 'auto_edit'],
    note: 'auto_edit: edit tools, still no shell',
  },
  { name: 'tool-fail', model: 'fake-tool-fail', prompt: 'Run a failing command', args: YOLO },
  { name: 'two-tools', model: 'fake-two-tools', prompt: 'Run two commands', args: YOLO },
  {
    name: 'tool-then-500',
    model: 'fake-tool-then-500',
    prompt: 'Run echo hi',
    args: YOLO,
    note: 'the tool ran, the next request got HTTP 500',
  },
  { name: 'http400', model: 'fake-http400', prompt: 'Say hello' },
  { name: 'http401', model: 'fake-http401', prompt: 'Say hello' },
  { name: 'http429', model: 'fake-http429', prompt: 'Say hello' },
  { name: 'http500', model: 'fake-http500', prompt: 'Say hello' },
  { name: 'http503', model: 'fake-http503', prompt: 'Say hello' },
  { name: 'midclose', model: 'fake-midclose', prompt: 'Say hello', note: 'the socket is closed after 2 text chunks' },
  {
    name: 'empty-response',
    model: 'fake-empty',
    prompt: 'Say hello',
    note: 'one chunk with empty text and finishReason STOP',
  },
  {
    name: 'retries-on',
    model: 'fake-http500',
    prompt: 'Say hello',
    settings: { ...RECORDING_SETTINGS, general: { ...RECORDING_SETTINGS.general, maxAttempts: 2 } },
    note: 'general.maxAttempts: 2: gemini retries once on its own and says so on stderr only',
  },
  {
    name: 'sigterm-during-tool',
    model: 'fake-long-tool',
    prompt: 'Run it',
    args: YOLO,
    signal: { name: 'SIGTERM', after: /"type":"tool_use"/, delayMs: 1000 },
  },
  {
    name: 'sigint-during-tool',
    model: 'fake-long-tool',
    prompt: 'Run it',
    args: YOLO,
    signal: { name: 'SIGINT', after: /"type":"tool_use"/, delayMs: 1000 },
  },
  {
    name: 'sigterm-streaming',
    model: 'fake-hang-midstream',
    prompt: 'Say hello',
    signal: { name: 'SIGTERM', after: /"role":"assistant"/, delayMs: 500 },
  },
  {
    name: 'resume',
    model: 'fake-text',
    prompt: 'And again',
    before: { model: 'fake-text', prompt: 'Say hello' },
    resumeBefore: true,
  },
  {
    name: 'resume-unknown',
    model: 'fake-text',
    prompt: 'Say hello',
    args: ['--resume', '5d1ccf9e-0000-4000-8000-000000000000'],
  },
  {
    name: 'resume-after-failed-first-request',
    model: 'fake-text',
    prompt: 'And again',
    before: { model: 'fake-http500', prompt: 'Say hello' },
    resumeBefore: true,
    note: 'gemini rolled the failed prompt back: the session has nothing to resume',
  },
  {
    name: 'no-auth-type',
    model: 'fake-text',
    prompt: 'Say hello',
    settings: { ...RECORDING_SETTINGS, security: {} },
    note: 'no security.auth.selectedType: GOOGLE_GEMINI_BASE_URL selects "gateway" auth',
  },
  { name: 'no-api-key', model: 'fake-text', prompt: 'Say hello', envDrop: ['GEMINI_API_KEY'] },
  { name: 'untrusted', model: 'fake-text', prompt: 'Say hello', note: 'without --skip-trust' },
];

const server: FakeGeminiServer = await startFakeGeminiServer();

interface Run {
  startedAt: number;
  stdout: string;
  stderr: string;
  code: number | null;
  signal: string | null;
  durationMs: number;
  signalSentAtMs?: number;
  timeline: Array<{ ms: number; line: string }>;
  leftBehind: string[];
}

function argsOf(s: Scenario, resumeId: string | null): string[] {
  const trust = s.name === 'untrusted' ? [] : ['--skip-trust'];
  return [
    '--output-format',
    'stream-json',
    '--model',
    s.model,
    ...trust,
    ...(resumeId === null ? [] : ['--resume', resumeId]),
    ...(s.args ?? []),
  ];
}

async function runGemini(
  dir: string,
  s: Scenario,
  model: string,
  prompt: string,
  resumeId: string | null,
  signal?: Scenario['signal'],
): Promise<Run> {
  const marker = `rec-${randomUUID()}`;
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: join(dir, 'home'),
    LANG: 'C.UTF-8',
    TMPDIR: join(dir, 'tmp'),
    GEMINI_API_KEY: FAKE_API_KEY,
    GOOGLE_GEMINI_BASE_URL: server.url,
    GEMINI_CLI_NO_RELAUNCH: 'true',
    [AGENT_MARKER_ENV]: marker,
    ...(s.envAdd ?? {}),
  };
  for (const key of s.envDrop ?? []) delete env[key];
  const started = Date.now();
  const child = spawn(geminiBin, argsOf({ ...s, model }, resumeId), {
    cwd: join(dir, 'work'),
    env,
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: true,
  });
  child.stdin.end(prompt);
  let stdout = '';
  let stderr = '';
  let pending = '';
  let signalSentAtMs: number | undefined;
  const timeline: Run['timeline'] = [];
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    stdout += chunk;
    pending += chunk;
    for (let nl = pending.indexOf('\n'); nl !== -1; nl = pending.indexOf('\n')) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      const type = /"type":"(\w+)"/.exec(line)?.[1] ?? '?';
      timeline.push({ ms: Date.now() - started, line: type });
      if (signal !== undefined && signalSentAtMs === undefined && signal.after.test(line)) {
        signalSentAtMs = -1;
        setTimeout(() => {
          signalSentAtMs = Date.now() - started;
          child.kill(signal.name);
        }, signal.delayMs);
      }
    }
  });
  child.stderr.on('data', (chunk: string) => (stderr += chunk));
  const [code, sig] = await new Promise<[number | null, string | null]>((resolve) =>
    child.on('exit', (c, g) => resolve([c, g])),
  );
  const durationMs = Date.now() - started;
  await new Promise((r) => setTimeout(r, 300));
  const left = await findProcessesByMarker(marker);
  const leftBehind = left.map((p) => {
    try {
      return readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
    } catch {
      return `pid ${p.pid}`;
    }
  });
  if (left.length > 0) await killProcessTree(child.pid ?? 0, marker);
  return {
    startedAt: started,
    stdout,
    stderr,
    code,
    signal: sig,
    durationMs,
    ...(signalSentAtMs === undefined || signalSentAtMs < 0 ? {} : { signalSentAtMs }),
    timeline,
    leftBehind,
  };
}

function sessionIdOf(stdout: string): string | null {
  return /"type":"init"[^\n]*"session_id":"([0-9a-f-]+)"/.exec(stdout)?.[1] ?? null;
}

async function record(s: Scenario): Promise<void> {
  const dir = join(REC_ROOT, s.name);
  rmSync(dir, { recursive: true, force: true });
  for (const sub of ['home/.gemini', 'work', 'tmp']) mkdirSync(join(dir, sub), { recursive: true });
  writeFileSync(
    join(dir, 'home', '.gemini', 'settings.json'),
    `${JSON.stringify(s.settings ?? RECORDING_SETTINGS, null, 2)}\n`,
  );
  let resumeId: string | null = null;
  if (s.before !== undefined) {
    const first = await runGemini(dir, { ...s, args: [] }, s.before.model, s.before.prompt, null);
    resumeId = s.resumeBefore === true ? sessionIdOf(first.stdout) : null;
  }
  server.reset();
  const run = await runGemini(dir, s, s.model, s.prompt, resumeId, s.signal);
  const t0 = run.startedAt;
  writeFileSync(join(OUT_DIR, `${s.name}.stdout.jsonl`), run.stdout);
  writeFileSync(join(OUT_DIR, `${s.name}.stderr.txt`), run.stderr);
  writeFileSync(join(OUT_DIR, `${s.name}.exit`), `${run.code !== null ? String(run.code) : String(run.signal)}\n`);
  const meta = {
    name: s.name,
    ...(s.note === undefined ? {} : { note: s.note }),
    command: ['gemini', ...argsOf(s, resumeId)],
    prompt: s.prompt,
    ...(s.before === undefined ? {} : { before: s.before }),
    settings: s.settings ?? RECORDING_SETTINGS,
    ...(s.envDrop === undefined ? {} : { envDropped: s.envDrop }),
    code: run.code,
    signal: run.signal,
    durationMs: run.durationMs,
    ...(run.signalSentAtMs === undefined
      ? {}
      : {
          signalSent: s.signal?.name,
          signalSentAtMs: run.signalSentAtMs,
          exitLatencyAfterSignalMs: run.durationMs - run.signalSentAtMs,
        }),
    timeline: run.timeline,
    requests: server.requests.map((r) => ({
      path: r.path,
      action: r.action,
      msSinceSpawn: r.at - t0,
      userTexts: userTexts(r.body).map((t) =>
        t.startsWith('<session_context>') ? `<session_context: ${t.length} chars>` : t,
      ),
      functionResponses: functionResponses(r.body),
      tools: declaredTools(r.body),
      apiKeyHeader: r.headers['x-goog-api-key'] === FAKE_API_KEY,
    })),
    leftBehind: run.leftBehind,
    chats: readdirSync(join(dir, 'home', '.gemini', 'tmp'), { recursive: true })
      .map(String)
      .filter((f) => f.endsWith('.jsonl')),
  };
  writeFileSync(join(OUT_DIR, `${s.name}.meta.json`), `${JSON.stringify(meta, null, 2)}\n`);
  console.log(
    `${s.name}: exit ${run.code ?? run.signal} in ${run.durationMs} ms, ${run.timeline.length} lines, ${server.requests.length} requests, left behind: ${run.leftBehind.length}`,
  );
  rmSync(dir, { recursive: true, force: true });
}

const filters = process.argv.slice(2);
mkdirSync(OUT_DIR, { recursive: true });
try {
  for (const s of SCENARIOS) {
    if (filters.length > 0 && !filters.some((f) => s.name.includes(f))) continue;
    await record(s);
  }
} finally {
  await server.close();
}
