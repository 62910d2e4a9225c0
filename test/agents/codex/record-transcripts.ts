/**
 * Records real `codex exec --json` runs (Codex 0.171.0) against the fake Responses server into
 * test/fixtures/codex/.
 *
 *   node --import tsx test/agents/codex/record-transcripts.ts            # every scenario
 *   node --import tsx test/agents/codex/record-transcripts.ts sig tool   # names containing "sig" or "tool"
 *
 * Each run uses the argv and CODEX_HOME that runCodex builds (options.ts, provider-config.ts,
 * home.ts), unless the scenario says otherwise. Per scenario: `<name>.stdout.jsonl` (byte for
 * byte), `<name>.stderr.txt`, `<name>.exit` (exit code, or the signal name when Codex died from it),
 * `<name>.requests.json` (what the fake server received, instructions and tool schemas elided) and
 * `<name>.meta.json` (argv, timeline, signals, process tree). See test/fixtures/codex/README.md.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { prepareManagedCodexHome } from '../../../src/agents/codex/home.ts';
import { codexArgs, CodexOptionsSchema, type CodexOptionsInput } from '../../../src/agents/codex/options.ts';
import { providerArgs } from '../../../src/agents/codex/provider-config.ts';
import {
  startFakeResponsesServer,
  type FakeResponsesServer,
  type RecordedResponsesRequest,
  type ResponsesScript,
} from '../../support/fake-responses-server.ts';
import {
  codexBin,
  codexOptions,
  createCodexEnv,
  FAKE_MODEL,
  REPO_ROOT,
  userProviderConfig,
  type CodexEnv,
} from './codex-env.ts';
import { alive, psAll, treeOf, type Proc } from '../../support/ps.ts';

/** How much of a process's command line the recordings keep. */
const ARGS_SHOWN = 120;

const OUT_DIR = join(REPO_ROOT, 'test', 'fixtures', 'codex');
/** Fixed root so that the paths Codex prints are the same on every recording. */
const REC_ROOT = '/tmp/sessiond-codex-rec';

const EXTRA_SCRIPTS: Record<string, ResponsesScript> = {
  'response-failed': { text: 'Partial', then: 'failed', error: { code: 'server_error', message: 'fake failure' } },
  'context-window': {
    then: 'failed',
    error: { code: 'context_length_exceeded', message: 'Your input exceeds the context window of this model.' },
  },
  'at-capacity': { then: 'failed', error: { code: 'server_is_overloaded', message: 'fake overloaded' } },
  'rate-limit-failed': {
    then: 'failed',
    error: { code: 'rate_limit_exceeded', message: 'Rate limit reached. Please try again in 20s.' },
  },
  'flaky-500-then-text': [{ status: 500 }, { text: 'Hello after a retry.' }],
};

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Run {
  stdout: string;
  stderr: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  durationMs: number;
  signalSentAtMs?: number;
  timeline: { ms: number; what: string }[];
}

interface RunSpec {
  env: CodexEnv;
  args: string[];
  codexHome: string;
  prompt: string;
  signal?: NodeJS.Signals;
  /** Send `signal` `signalDelayMs` after the first stdout line containing this. */
  signalWhen?: string;
  signalDelayMs?: number;
  beforeSignal?: (pid: number) => void;
}

function runCodexRaw(spec: RunSpec): Promise<Run> {
  return new Promise((resolvePromise, reject) => {
    const started = Date.now();
    const child = spawn(codexBin, spec.args, {
      cwd: spec.env.cwd,
      env: { ...spec.env.env, CODEX_HOME: spec.codexHome, TMPDIR: join(spec.env.root, 'tmp') },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    child.stdin.end(spec.prompt);
    let stdout = '';
    let stderr = '';
    let pending = '';
    let signalSentAtMs: number | undefined;
    const timeline: { ms: number; what: string }[] = [];
    const timers: NodeJS.Timeout[] = [setTimeout(() => child.kill('SIGKILL'), 60_000)];
    const sendSignal = (): void => {
      if (
        signalSentAtMs !== undefined ||
        spec.signal === undefined ||
        child.exitCode !== null ||
        child.pid === undefined
      )
        return;
      spec.beforeSignal?.(child.pid);
      signalSentAtMs = Date.now() - started;
      timeline.push({ ms: signalSentAtMs, what: `send ${spec.signal}` });
      child.kill(spec.signal);
    };
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    child.stdout.on('data', (d: string) => {
      stdout += d;
      pending += d;
      for (let nl = pending.indexOf('\n'); nl >= 0; nl = pending.indexOf('\n')) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        const type = /"type":"([^"]+)"/.exec(line)?.[1] ?? '?';
        timeline.push({ ms: Date.now() - started, what: `stdout ${type}` });
        if (spec.signalWhen !== undefined && line.includes(spec.signalWhen))
          timers.push(setTimeout(sendSignal, spec.signalDelayMs ?? 0));
      }
    });
    child.stderr.on('data', (d: string) => (stderr += d));
    child.once('error', reject);
    child.once('close', (code, signal) => {
      for (const t of timers) clearTimeout(t);
      timeline.push({ ms: Date.now() - started, what: `exit code=${code} signal=${signal}` });
      resolvePromise({
        stdout,
        stderr,
        code,
        signal,
        durationMs: Date.now() - started,
        ...(signalSentAtMs === undefined ? {} : { signalSentAtMs }),
        timeline,
      });
    });
  });
}

/** The argv and CODEX_HOME runCodex would use for these options. */
async function sessiondRun(
  env: CodexEnv,
  options: CodexOptionsInput,
): Promise<{ args: string[]; codexHome: string; prompt: string }> {
  const parsed = CodexOptionsSchema.parse(options);
  const home = await prepareManagedCodexHome(env.userCodexHome, env.stateDir);
  const provider = providerArgs(parsed, home.userConfig);
  if (!provider.ok) throw new Error(provider.error);
  return { args: codexArgs(parsed, provider.args), codexHome: home.path, prompt: parsed.prompt };
}

function sanitizeRequest(r: RecordedResponsesRequest, t0: number): unknown {
  const { instructions, tools, input, ...rest } = r.body;
  const shownInput = (input ?? []).map((item) => {
    if (item.type !== 'message' || item.role !== 'developer') return item;
    const length = JSON.stringify(item.content ?? '').length;
    return { ...item, content: `<developer message: ${length} chars>` };
  });
  const toolNames = (tools ?? []).map((t) => {
    const tool = t as { name?: string; type?: string };
    return `<tool ${tool.name ?? tool.type ?? '?'}>`;
  });
  const headers = Object.fromEntries(
    Object.entries(r.headers).filter(([k]) => ['user-agent', 'content-type', 'accept', 'originator'].includes(k)),
  );
  return {
    index: r.index,
    scriptIndex: r.scriptIndex,
    script: r.script,
    msSinceSpawn: r.at - t0,
    headers,
    body: {
      ...rest,
      ...(instructions === undefined ? {} : { instructions: `<${String(instructions).length} chars>` }),
      tools: toolNames,
      input: shownInput,
    },
  };
}

function save(
  name: string,
  run: Run,
  startedAt: number,
  requests: RecordedResponsesRequest[],
  meta: Record<string, unknown>,
): void {
  const exit = run.code !== null ? String(run.code) : String(run.signal ?? 'unknown');
  writeFileSync(join(OUT_DIR, `${name}.stdout.jsonl`), run.stdout);
  writeFileSync(join(OUT_DIR, `${name}.stderr.txt`), run.stderr);
  writeFileSync(join(OUT_DIR, `${name}.exit`), `${exit}\n`);
  writeFileSync(
    join(OUT_DIR, `${name}.requests.json`),
    `${JSON.stringify(
      requests.map((r) => sanitizeRequest(r, startedAt)),
      null,
      2,
    )}\n`,
  );
  const signalMeta =
    run.signalSentAtMs === undefined
      ? {}
      : { signalSentAtMs: run.signalSentAtMs, exitLatencyAfterSignalMs: run.durationMs - run.signalSentAtMs };
  writeFileSync(
    join(OUT_DIR, `${name}.meta.json`),
    `${JSON.stringify({ name, durationMs: run.durationMs, code: run.code, signal: run.signal, ...signalMeta, timeline: run.timeline, ...meta }, null, 2)}\n`,
  );
  console.log(
    `${name}: exit ${exit} in ${run.durationMs} ms, ${run.stdout.split('\n').filter(Boolean).length} lines, ${requests.length} requests`,
  );
}

/** Paths in argv made stable for meta.json. */
function shownArgs(args: string[], server: FakeResponsesServer): string[] {
  return args.map((a) => a.replaceAll(server.origin, 'http://127.0.0.1:PORT'));
}

// ---------------------------------------------------------------------------------------------
// Process tree (signal scenarios)
// ---------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------------------------

interface Ctx {
  server: FakeResponsesServer;
}

function envFor(name: string, config?: string): CodexEnv {
  const env = createCodexEnv({ root: join(REC_ROOT, name), ...(config === undefined ? {} : { config }) });
  mkdirSync(join(env.root, 'tmp'), { recursive: true });
  return env;
}

async function record(
  ctx: Ctx,
  name: string,
  env: CodexEnv,
  run: { args: string[]; codexHome: string; prompt: string },
  more: Partial<RunSpec> = {},
  meta: Record<string, unknown> = {},
): Promise<Run> {
  const before = ctx.server.requests.length;
  const startedAt = Date.now();
  let treeBefore: Proc[] = [];
  const result = await runCodexRaw({
    env,
    ...run,
    ...more,
    beforeSignal: (pid) => {
      treeBefore = treeOf(psAll(ARGS_SHOWN), pid);
    },
  });
  await sleep(500);
  const survivors = alive(treeBefore.slice(1), ARGS_SHOWN);
  for (const p of survivors) {
    try {
      process.kill(p.pid, 'SIGKILL'); // what Codex left behind (processes this script started)
    } catch {
      // gone
    }
  }
  const signalMeta =
    more.signal === undefined
      ? {}
      : {
          signal: more.signal,
          signalWhen: `${more.signalWhen} + ${more.signalDelayMs ?? 0} ms`,
          processTreeBeforeSignal: treeBefore,
          descendantsAlive500msAfterExit: survivors,
        };
  save(name, result, startedAt, ctx.server.requests.slice(before), {
    argv: ['codex', ...shownArgs(run.args, ctx.server)],
    prompt: run.prompt,
    ...signalMeta,
    ...meta,
  });
  return result;
}

/** A scenario run exactly as runCodex runs it, on script `script`. */
async function simple(
  ctx: Ctx,
  name: string,
  script: string,
  extra: Partial<CodexOptionsInput> = {},
  more: Partial<RunSpec> = {},
): Promise<Run> {
  const env = envFor(name);
  const run = await sessiondRun(
    env,
    codexOptions(env, ctx.server.urlFor(script), { prompt: extra.prompt ?? 'Say hello', ...extra }),
  );
  return record(ctx, name, env, run, more, { script });
}

/** A run with the user's own provider and Codex's default-style retries left ON (no sessiond overrides), to record its retry events. */
async function withAgentRetries(ctx: Ctx, name: string, script: string, retries: number): Promise<void> {
  const env = envFor(name, userProviderConfig(ctx.server.urlFor(script), retries));
  const home = await prepareManagedCodexHome(env.userCodexHome, env.stateDir);
  const args = ['exec', '--json', '--skip-git-repo-check', '-c', 'sandbox_mode="read-only"', '-m', FAKE_MODEL, '-'];
  await record(
    ctx,
    name,
    env,
    { args, codexHome: home.path, prompt: 'Say hello' },
    {},
    {
      script,
      note: `Codex's own retries ON (request_max_retries = stream_max_retries = ${retries}), not what sessiond runs`,
    },
  );
}

async function sessionPair(ctx: Ctx): Promise<void> {
  const env = envFor('session');
  const first = await sessiondRun(env, codexOptions(env, ctx.server.urlFor('text-plain'), { prompt: 'first prompt' }));
  const run = await record(ctx, 'session-first', env, first, {}, { script: 'text-plain' });
  const id = /"thread_id":"([^"]+)"/.exec(run.stdout)?.[1];
  if (id === undefined) throw new Error('session-first: no thread id');
  const second = await sessiondRun(
    env,
    codexOptions(env, ctx.server.urlFor('tool'), {
      prompt: 'second prompt: run echo hi',
      session: { mode: 'resume', id },
    }),
  );
  await record(ctx, 'session-resume', env, second, {}, { script: 'tool', resumedThreadId: id });
}

const SCENARIOS: Record<string, (ctx: Ctx) => Promise<unknown>> = {
  text: (ctx) => simple(ctx, 'text', 'text'),
  'text-plain': (ctx) => simple(ctx, 'text-plain', 'text-plain'),
  tool: (ctx) => simple(ctx, 'tool', 'tool', { prompt: 'Run echo hi' }),
  'tool-fail': (ctx) => simple(ctx, 'tool-fail', 'tool-fail', { prompt: 'Run a failing command' }),
  'two-tools': (ctx) => simple(ctx, 'two-tools', 'two-tools', { prompt: 'Run two commands' }),
  'text-tool-text': (ctx) => simple(ctx, 'text-tool-text', 'text-tool-text', { prompt: 'Run echo hi' }),
  'tool-sandbox-denied': (ctx) =>
    simple(ctx, 'tool-sandbox-denied', 'tool-write', { prompt: 'Write a file', sandbox: 'read-only' }),
  'tool-workspace-write': (ctx) =>
    simple(ctx, 'tool-workspace-write', 'tool-write', { prompt: 'Write a file', sandbox: 'workspace-write' }),
  http400: (ctx) => simple(ctx, 'http400', 'http400'),
  http401: (ctx) => simple(ctx, 'http401', 'http401'),
  http429: (ctx) => simple(ctx, 'http429', 'http429'),
  http500: (ctx) => simple(ctx, 'http500', 'http500'),
  http503: (ctx) => simple(ctx, 'http503', 'http503'),
  midclose: (ctx) => simple(ctx, 'midclose', 'midclose'),
  'response-failed': (ctx) => simple(ctx, 'response-failed', 'response-failed'),
  'context-window': (ctx) => simple(ctx, 'context-window', 'context-window'),
  'at-capacity': (ctx) => simple(ctx, 'at-capacity', 'at-capacity'),
  'rate-limit-failed': (ctx) => simple(ctx, 'rate-limit-failed', 'rate-limit-failed'),
  'unknown-model': (ctx) => simple(ctx, 'unknown-model', 'text-plain', { model: 'fake-unknown-model' }),
  'http500-agent-retries': (ctx) => withAgentRetries(ctx, 'http500-agent-retries', 'http500', 2),
  'flaky-500-agent-retries': (ctx) => withAgentRetries(ctx, 'flaky-500-agent-retries', 'flaky-500-then-text', 1),
  session: (ctx) => sessionPair(ctx),
  'resume-unknown-thread': (ctx) =>
    simple(ctx, 'resume-unknown-thread', 'text-plain', {
      session: { mode: 'resume', id: '01a2294d-0000-7000-8000-000000000000' },
    }),
  'bad-args': (ctx) => simple(ctx, 'bad-args', 'text-plain', { extraArgs: ['--full-auto'] }),
  'sigint-during-tool': (ctx) =>
    simple(
      ctx,
      'sigint-during-tool',
      'long-tool',
      { prompt: 'Run a long command' },
      { signal: 'SIGINT', signalWhen: '"item.started"', signalDelayMs: 700 },
    ),
  'sigterm-during-tool': (ctx) =>
    simple(
      ctx,
      'sigterm-during-tool',
      'long-tool',
      { prompt: 'Run a long command' },
      { signal: 'SIGTERM', signalWhen: '"item.started"', signalDelayMs: 700 },
    ),
  'sigterm-during-tool-full-access': (ctx) =>
    simple(
      ctx,
      'sigterm-during-tool-full-access',
      'long-tool',
      { prompt: 'Run a long command', sandbox: 'danger-full-access' },
      { signal: 'SIGTERM', signalWhen: '"item.started"', signalDelayMs: 700 },
    ),
  'sigint-during-tool-full-access': (ctx) =>
    simple(
      ctx,
      'sigint-during-tool-full-access',
      'long-tool',
      { prompt: 'Run a long command', sandbox: 'danger-full-access' },
      { signal: 'SIGINT', signalWhen: '"item.started"', signalDelayMs: 700 },
    ),
  'sigint-streaming': (ctx) =>
    simple(
      ctx,
      'sigint-streaming',
      'hang-midstream',
      {},
      { signal: 'SIGINT', signalWhen: '"turn.started"', signalDelayMs: 1500 },
    ),
};

async function main(): Promise<void> {
  const filters = process.argv.slice(2);
  const selected = Object.entries(SCENARIOS).filter(
    ([name]) => filters.length === 0 || filters.some((f) => name.includes(f)),
  );
  if (selected.length === 0)
    throw new Error(`no scenario matches ${filters.join(' ')}; known: ${Object.keys(SCENARIOS).join(', ')}`);
  mkdirSync(OUT_DIR, { recursive: true });
  const server = await startFakeResponsesServer({ scripts: EXTRA_SCRIPTS });
  try {
    for (const [name, fn] of selected) {
      server.reset(); // deterministic response ids / queue positions per scenario
      try {
        await fn({ server });
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
