/**
 * Records real Claude Code (agent-clis/, pinned 2.1.332) runs against the fake Anthropic server
 * into test/fixtures/claude-code/, with exactly the argv and environment that
 * src/agents/claude-code/provider.ts uses (claudeCodeArgs / claudeCodeEnv), prompt on stdin.
 *
 *   node --import tsx test/support/record-claude-code-transcripts.ts            # every scenario
 *   node --import tsx test/support/record-claude-code-transcripts.ts sig        # names containing "sig"
 *
 * Per scenario: `<name>.stdout.jsonl` (byte for byte), `<name>.stderr.txt`, `<name>.exit` (exit code,
 * or the signal name) and `<name>.meta.json` (options, requests the server got, signal and the
 * processes of the tree still alive after the exit). See test/fixtures/claude-code/README.md.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  claudeCodeArgs,
  claudeCodeEnv,
  ClaudeCodeOptionsSchema,
  type ClaudeCodeOptionsInput,
} from '../../src/agents/claude-code/options.ts';
import { createClaudeEnv, REPO_ROOT, type ClaudeEnv } from './claude-code-env.ts';
import { startFakeAnthropicServer, type FakeAnthropicServer } from './fake-anthropic-server.ts';
import { psAll, treeOf, type Proc } from './ps.ts';

const OUT_DIR = join(REPO_ROOT, 'test', 'fixtures', 'claude-code');
/** Fixed root so that the cwd and paths Claude Code prints are the same on every recording. */
const REC_ROOT = '/tmp/sessiond-claude-rec';

interface SignalPlan {
  signal: NodeJS.Signals;
  /** Sent this long after the first stdout line containing `after`. */
  after: string;
  delayMs: number;
}

interface Scenario {
  model: string;
  prompt: string;
  options?: Partial<ClaudeCodeOptionsInput>;
  /** Set after claudeCodeEnv (to record what the provider switches off). */
  envOverride?: Record<string, string>;
  signal?: SignalPlan;
  /** Runs first in the same environment; its session is resumed by this one. */
  resumeOf?: string;
  note?: string;
}

interface Run {
  stdout: string;
  stderr: string;
  code: number | null;
  signal: string | null;
  survivors: string[];
}

/** The live descendants of `root` (zombies left out). */
function descendants(root: number): Proc[] {
  return treeOf(
    psAll().filter((p) => !p.stat.startsWith('Z')),
    root,
  ).filter((p) => p.pid !== root);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function runClaude(env: ClaudeEnv, scenario: Scenario, input: ClaudeCodeOptionsInput): Promise<Run> {
  const options = ClaudeCodeOptionsSchema.parse(input);
  const childEnv = {
    ...claudeCodeEnv(options, { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8' }),
    ...(scenario.envOverride ?? {}),
  };
  const child = spawn(options.command, claudeCodeArgs(options), {
    cwd: env.cwd,
    env: childEnv,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  child.stdin.end(options.prompt);
  let stdout = '';
  let stderr = '';
  let tree: Proc[] = [];
  let signalled = false;
  child.stdout.on('data', (d: Buffer) => {
    stdout += d.toString('utf8');
    const plan = scenario.signal;
    if (plan !== undefined && !signalled && stdout.includes(plan.after)) {
      signalled = true;
      setTimeout(() => {
        tree = child.pid === undefined ? [] : descendants(child.pid);
        child.kill(plan.signal);
      }, plan.delayMs);
    }
  });
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
  // 'exit', not 'close': a tool left running may hold the pipes open.
  const [code, signal] = await new Promise<[number | null, string | null]>((r) =>
    child.on('exit', (c, s) => r([c, s])),
  );
  clearTimeout(timer);
  await sleep(500);
  child.stdout.destroy();
  child.stderr.destroy();
  const alive = new Set(psAll().map((p) => `${p.pid} ${p.args}`));
  const survivors = tree.filter((p) => alive.has(`${p.pid} ${p.args}`));
  for (const p of survivors) {
    try {
      process.kill(p.pid, 'SIGKILL'); // what Claude Code left behind (processes this script started)
    } catch {
      // gone
    }
  }
  return { stdout, stderr, code, signal, survivors: survivors.map((p) => p.args) };
}

function sessionIdOf(stdout: string): string | null {
  for (const line of stdout.split('\n')) {
    try {
      const event = JSON.parse(line) as { type?: string; subtype?: string; session_id?: string };
      if (event.type === 'system' && event.subtype === 'init' && typeof event.session_id === 'string')
        return event.session_id;
    } catch {
      // not JSON
    }
  }
  return null;
}

function save(name: string, run: Run, meta: Record<string, unknown>): void {
  writeFileSync(join(OUT_DIR, `${name}.stdout.jsonl`), run.stdout);
  writeFileSync(join(OUT_DIR, `${name}.stderr.txt`), run.stderr);
  writeFileSync(join(OUT_DIR, `${name}.exit`), `${run.code ?? run.signal ?? 'unknown'}\n`);
  writeFileSync(
    join(OUT_DIR, `${name}.meta.json`),
    `${JSON.stringify({ name, ...meta, survivorsAfterExit: run.survivors }, null, 2)}\n`,
  );
  console.log(
    `${name}: exit ${run.code ?? run.signal}, ${run.stdout.split('\n').filter(Boolean).length} lines, survivors ${run.survivors.length}`,
  );
}

const SAY_HELLO = 'Say hello';
const RUN_ECHO = 'Run echo hi with Bash';
const WHOLE = { includePartialMessages: false };
const BASH_ALLOWED = { allowedTools: ['Bash'] };

const SCENARIOS: Record<string, Scenario> = {
  text: { model: 'text', prompt: SAY_HELLO },
  'text-whole': { model: 'text', prompt: SAY_HELLO, options: WHOLE },
  tool: { model: 'tool', prompt: RUN_ECHO },
  'tool-whole': { model: 'tool', prompt: RUN_ECHO, options: WHOLE },
  'tool-fail': { model: 'tool-fail', prompt: 'Run a failing command' },
  'two-tools': { model: 'two-tools', prompt: 'Run two commands' },
  'tool-denied': {
    model: 'tool-denied',
    prompt: 'Create a file',
    note: 'permissionMode default: touch needs approval, denied',
  },
  'tool-accept-edits': { model: 'tool-denied', prompt: 'Create a file', options: { permissionMode: 'acceptEdits' } },
  http401: { model: 'http401', prompt: SAY_HELLO },
  http429: { model: 'http429', prompt: SAY_HELLO, note: 'server sent Retry-After: 7' },
  http500: { model: 'http500', prompt: SAY_HELLO },
  'http500-whole': { model: 'http500', prompt: SAY_HELLO, options: WHOLE },
  http529: { model: 'http529', prompt: SAY_HELLO },
  midclose: { model: 'midclose', prompt: SAY_HELLO, note: 'the server drops the socket after the first text delta' },
  'http500-own-retries': {
    model: 'http500',
    prompt: SAY_HELLO,
    envOverride: { CLAUDE_CODE_MAX_RETRIES: '1' },
    note: "Claude Code's own retries switched back on (1) to record system/api_retry",
  },
  'sigint-streaming': {
    model: 'hang-midstream',
    prompt: SAY_HELLO,
    signal: { signal: 'SIGINT', after: 'text_delta', delayMs: 300 },
  },
  'sigint-long-tool': {
    model: 'long-tool',
    prompt: 'Wait',
    options: BASH_ALLOWED,
    signal: { signal: 'SIGINT', after: 'task_started', delayMs: 700 },
  },
  'sigint-long-tool-bg': {
    model: 'long-tool-bg',
    prompt: 'Wait',
    options: BASH_ALLOWED,
    signal: { signal: 'SIGINT', after: 'task_started', delayMs: 700 },
  },
  'sigterm-long-tool': {
    model: 'long-tool',
    prompt: 'Wait',
    options: BASH_ALLOWED,
    signal: { signal: 'SIGTERM', after: 'task_started', delayMs: 700 },
  },
  'sigterm-streaming': {
    model: 'hang-midstream',
    prompt: SAY_HELLO,
    signal: { signal: 'SIGTERM', after: 'text_delta', delayMs: 300 },
  },
  'resume-first': { model: 'text', prompt: 'first prompt' },
  'resume-second': { model: 'text', prompt: 'second prompt', resumeOf: 'resume-first' },
  'resume-after-500': { model: 'text', prompt: 'second prompt', resumeOf: 'http500' },
  'resume-missing': {
    model: 'text',
    prompt: SAY_HELLO,
    options: { session: { mode: 'resume', id: '11111111-2222-4333-8444-555555555555' } },
  },
};

async function record(server: FakeAnthropicServer, name: string, scenario: Scenario): Promise<void> {
  const env = createClaudeEnv(server.url, join(REC_ROOT, name));
  let session: ClaudeCodeOptionsInput['session'] = scenario.options?.session ?? { mode: 'new' };
  if (scenario.resumeOf !== undefined) {
    const first = SCENARIOS[scenario.resumeOf];
    if (first === undefined) throw new Error(`no scenario ${scenario.resumeOf}`);
    const firstRun = await runClaude(env, first, {
      ...env.options,
      ...first.options,
      model: first.model,
      prompt: first.prompt,
    });
    const id = sessionIdOf(firstRun.stdout);
    if (id === null) throw new Error(`${name}: ${scenario.resumeOf} printed no session id`);
    session = { mode: 'resume', id };
  }
  const before = server.requests.length;
  const input: ClaudeCodeOptionsInput = {
    ...env.options,
    ...scenario.options,
    model: scenario.model,
    prompt: scenario.prompt,
    session,
  };
  const run = await runClaude(env, scenario, input);
  const requests = server.requests.slice(before).map((r) => ({
    model: r.model,
    stream: r.body.stream,
    messages: (r.body.messages ?? []).map((m) => ({
      role: m.role,
      blocks: Array.isArray(m.content) ? (m.content as { type?: string }[]).map((b) => b.type) : 'text',
    })),
  }));
  save(name, run, {
    model: scenario.model,
    prompt: scenario.prompt,
    options: { ...scenario.options, session },
    ...(scenario.envOverride === undefined ? {} : { envOverride: scenario.envOverride }),
    ...(scenario.signal === undefined ? {} : { signal: scenario.signal }),
    ...(scenario.note === undefined ? {} : { note: scenario.note }),
    requests,
  });
  env.cleanup();
}

async function main(): Promise<void> {
  const filters = process.argv.slice(2);
  const selected = Object.entries(SCENARIOS).filter(
    ([name]) => filters.length === 0 || filters.some((f) => name.includes(f)),
  );
  if (selected.length === 0)
    throw new Error(`no scenario matches ${filters.join(' ')}; known: ${Object.keys(SCENARIOS).join(', ')}`);
  mkdirSync(OUT_DIR, { recursive: true });
  const server = await startFakeAnthropicServer();
  try {
    for (const [name, scenario] of selected) {
      server.reset();
      try {
        await record(server, name, scenario);
      } catch (err) {
        console.error(`${name}: FAILED`, err);
        process.exitCode = 1;
      }
    }
  } finally {
    await server.close();
    rmSync(REC_ROOT, { recursive: true, force: true });
  }
}

await main();
