/**
 * Records real `pi` (0.73.1) runs against the fake model server into test/fixtures/pi/.
 *
 *   node --import tsx test/support/record-pi-transcripts.ts            # every scenario
 *   node --import tsx test/support/record-pi-transcripts.ts session    # names containing "session"
 *
 * Per scenario: `<name>.stdout.jsonl` (byte for byte), `<name>.stderr.txt`, `<name>.exit`
 * (exit code, or the signal name when pi died from a signal), and where relevant
 * `<name>.requests.json` (what the fake server received), `<name>.session.jsonl` (the session
 * file after the run) and `<name>.meta.json` (timeline, signals, process tree, notes).
 * See test/fixtures/pi/README.md.
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import {
  hasToolResult,
  startFakeModelServer,
  type FakeModelServer,
  type RecordedRequest,
  type Script,
} from './fake-model-server.ts';
import {
  createPiEnv,
  findSessionFiles,
  piArgs,
  REPO_ROOT,
  runPi,
  sessionIdOf,
  type PiArgsOptions,
  type PiEnv,
  type PiRun,
  type RunPiOptions,
} from './pi-env.ts';
import { alive, psAll, treeOf, type Proc } from './ps.ts';

const OUT_DIR = join(REPO_ROOT, 'test', 'fixtures', 'pi');
/** Fixed root so that the cwd / paths printed by pi are the same on every recording. */
const REC_ROOT = '/tmp/sessiond-pi-rec';

const SAY_HELLO = 'Say hello';
const RUN_ECHO = 'Run echo hi with bash';

/** Extra models scripted by the recorder (declared in models.json via extraModels). */
const EXTRA_SCRIPTS: Record<string, Script> = {
  'pwd-tool': ({ body }) =>
    hasToolResult(body)
      ? { text: 'That was the cwd.' }
      : { toolCalls: [{ name: 'bash', arguments: { command: 'pwd' } }] },
};
const EXTRA_MODELS = Object.keys(EXTRA_SCRIPTS);

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------------------------

interface SaveExtra {
  requests?: RecordedRequest[];
  sessionFile?: string;
  meta?: Record<string, unknown>;
}

function exitText(run: PiRun): string {
  return run.code !== null ? String(run.code) : String(run.signal ?? 'unknown');
}

function sanitizeRequest(r: RecordedRequest, t0: number): unknown {
  const body = { ...r.body };
  if (Array.isArray(body.messages)) {
    body.messages = body.messages.map((m) =>
      m.role === 'system' && typeof m.content === 'string'
        ? { ...m, content: `<system prompt: ${m.content.length} chars>` }
        : m,
    );
  }
  if (Array.isArray(body.tools)) {
    body.tools = body.tools.map((t) => {
      const fn = (t as { function?: { name?: string } }).function;
      return `<tool ${fn?.name ?? '?'}>`;
    });
  }
  const headers = Object.fromEntries(
    Object.entries(r.headers).filter(
      ([k]) => k === 'user-agent' || k.startsWith('x-stainless-retry') || k === 'content-type',
    ),
  );
  return { index: r.index, modelIndex: r.modelIndex, model: r.model, msSinceSpawn: r.at - t0, headers, body };
}

function save(name: string, run: PiRun, startedAt: number, extra: SaveExtra = {}): void {
  writeFileSync(join(OUT_DIR, `${name}.stdout.jsonl`), run.stdout);
  writeFileSync(join(OUT_DIR, `${name}.stderr.txt`), run.stderr);
  writeFileSync(join(OUT_DIR, `${name}.exit`), `${exitText(run)}\n`);
  if (extra.requests) {
    writeFileSync(
      join(OUT_DIR, `${name}.requests.json`),
      `${JSON.stringify(
        extra.requests.map((r) => sanitizeRequest(r, startedAt)),
        null,
        2,
      )}\n`,
    );
  }
  if (extra.sessionFile) {
    writeFileSync(join(OUT_DIR, `${name}.session.jsonl`), readFileSync(extra.sessionFile));
  }
  const meta = {
    name,
    durationMs: run.durationMs,
    code: run.code,
    signal: run.signal,
    ...(run.signalSentAtMs !== undefined
      ? { signalSentAtMs: run.signalSentAtMs, exitLatencyAfterSignalMs: run.durationMs - run.signalSentAtMs }
      : {}),
    timeline: run.timeline,
    ...(extra.meta ?? {}),
  };
  writeFileSync(join(OUT_DIR, `${name}.meta.json`), `${JSON.stringify(meta, null, 2)}\n`);
  const types = run.events.map((e) => e.type);
  console.log(
    `${name}: exit ${exitText(run)} in ${run.durationMs} ms, ${types.length} events, ${extra.requests?.length ?? '-'} requests`,
  );
}

// ---------------------------------------------------------------------------------------------
// Process tree helpers (for the signal scenarios)
// ---------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------------------------

interface Ctx {
  server: FakeModelServer;
}

type EnvOpts = { retries?: boolean; settings?: Record<string, unknown> };

function envFor(ctx: Ctx, dir: string, opts: EnvOpts = {}): PiEnv {
  return createPiEnv({ serverUrl: ctx.server.url, root: join(REC_ROOT, dir), extraModels: EXTRA_MODELS, ...opts });
}

/** Runs pi and returns the run plus the requests the server got during it. */
async function run(
  ctx: Ctx,
  env: PiEnv,
  args: PiArgsOptions,
  more: Partial<RunPiOptions> = {},
): Promise<{ run: PiRun; requests: RecordedRequest[]; startedAt: number }> {
  const before = ctx.server.requests.length;
  const startedAt = Date.now();
  const r = await runPi({ env, args: piArgs(args), timeoutMs: 60_000, ...more });
  await sleep(50);
  return { run: r, requests: ctx.server.requests.slice(before), startedAt };
}

async function simple(
  ctx: Ctx,
  name: string,
  model: string,
  prompt: string,
  opts: EnvOpts = {},
  meta?: Record<string, unknown>,
): Promise<PiRun> {
  const env = envFor(ctx, name, opts);
  const r = await run(ctx, env, { model, prompt });
  save(name, r.run, r.startedAt, { requests: r.requests, meta: { model, prompt, ...(meta ?? {}) } });
  return r.run;
}

const isEvent =
  (type: string) =>
  (line: string): boolean =>
    line.includes(`"type":"${type}"`);

async function signalScenario(
  ctx: Ctx,
  name: string,
  model: string,
  signal: NodeJS.Signals,
  when: string,
  delayMs: number,
  prompt = SAY_HELLO,
): Promise<void> {
  const env = envFor(ctx, name);
  let treeBefore: Proc[] = [];
  const r = await run(
    ctx,
    env,
    { model, prompt },
    {
      signal,
      signalWhen: isEvent(when),
      signalDelayMs: delayMs,
      beforeSignal: (pid) => {
        treeBefore = treeOf(psAll(), pid);
      },
    },
  );
  await sleep(500);
  const survivors = alive(treeBefore.slice(1));
  for (const p of survivors) {
    try {
      process.kill(p.pid, 'SIGKILL'); // clean up what pi left behind (processes this script started)
    } catch {
      // gone
    }
  }
  save(name, r.run, r.startedAt, {
    requests: r.requests,
    meta: {
      model,
      prompt,
      signal,
      signalWhen: `${when} + ${delayMs} ms`,
      processTreeBeforeSignal: treeBefore,
      descendantsAlive500msAfterExit: survivors,
    },
  });
}

async function sessionPair(
  ctx: Ctx,
  base: string,
  firstModel: string,
  firstPrompt: string,
  resumeModel: string,
  resumePrompt: string,
  firstMore: Partial<RunPiOptions> = {},
): Promise<void> {
  const env = envFor(ctx, base);
  const first = await run(
    ctx,
    env,
    { model: firstModel, prompt: firstPrompt, session: { dir: env.sessionDir } },
    firstMore,
  );
  const id = sessionIdOf(first.run);
  const filesAfterFirst = findSessionFiles(env.sessionDir);
  save(`${base}-first`, first.run, first.startedAt, {
    requests: first.requests,
    ...(filesAfterFirst[0] ? { sessionFile: filesAfterFirst[0] } : {}),
    meta: {
      model: firstModel,
      prompt: firstPrompt,
      sessionId: id,
      sessionDirListing: filesAfterFirst.map((f) => basename(f)),
    },
  });
  if (!id) return;
  const second = await run(ctx, env, {
    model: resumeModel,
    prompt: resumePrompt,
    session: { dir: env.sessionDir, id },
  });
  const filesAfter = findSessionFiles(env.sessionDir);
  const resumedId = sessionIdOf(second.run);
  save(`${base}-resume`, second.run, second.startedAt, {
    requests: second.requests,
    ...(filesAfter[0] ? { sessionFile: filesAfter[0] } : {}),
    meta: {
      model: resumeModel,
      prompt: resumePrompt,
      args: piArgs({ model: resumeModel, prompt: resumePrompt, session: { dir: env.sessionDir, id } }),
      firstSessionId: id,
      resumedSessionId: resumedId,
      sameId: id === resumedId,
      sessionDirListing: filesAfter.map((f) => basename(f)),
    },
  });
}

async function sessionCopy(ctx: Ctx): Promise<void> {
  // host1: create a session.
  const host1 = envFor(ctx, 'session-copy-host1');
  const first = await run(ctx, host1, { model: 'text', prompt: 'first prompt', session: { dir: host1.sessionDir } });
  const id = sessionIdOf(first.run);
  const [file] = findSessionFiles(host1.sessionDir, id);
  if (!id || !file) throw new Error('session-copy: no session created on host1');
  save('session-copy-host1', first.run, first.startedAt, {
    requests: first.requests,
    sessionFile: file,
    meta: { sessionId: id, file: basename(file) },
  });
  const content = readFileSync(file, 'utf8');

  const variants: { name: string; prepare: (host2: PiEnv) => void; note: string }[] = [
    {
      name: 'session-copy-same-cwd',
      note: 'file copied verbatim; the header cwd (host1 work dir) still exists on this machine',
      prepare: (host2) => writeFileSync(join(host2.sessionDir, basename(file)), content),
    },
    {
      name: 'session-copy-rewritten-cwd',
      note: 'file copied with the header cwd rewritten to host2 work dir',
      prepare: (host2) => {
        const lines = content.split('\n');
        const header = JSON.parse(lines[0] ?? '{}') as Record<string, unknown>;
        header.cwd = host2.cwd;
        lines[0] = JSON.stringify(header);
        writeFileSync(join(host2.sessionDir, basename(file)), lines.join('\n'));
      },
    },
    {
      name: 'session-copy-missing-cwd',
      note: 'file copied verbatim, but the header cwd (host1 work dir) was deleted first',
      prepare: (host2) => {
        writeFileSync(join(host2.sessionDir, basename(file)), content);
        rmSync(host1.cwd, { recursive: true, force: true });
      },
    },
  ];
  for (const v of variants) {
    const host2 = envFor(ctx, v.name);
    v.prepare(host2);
    const r = await run(ctx, host2, {
      model: 'pwd-tool',
      prompt: 'second prompt: run pwd',
      session: { dir: host2.sessionDir, id },
    });
    const files = findSessionFiles(host2.sessionDir);
    const toolEnd = r.run.events.find((e) => e.type === 'tool_execution_end');
    save(v.name, r.run, r.startedAt, {
      requests: r.requests,
      ...(files[0] ? { sessionFile: files[0] } : {}),
      meta: {
        note: v.note,
        host1Cwd: host1.cwd,
        host2Cwd: host2.cwd,
        firstSessionId: id,
        resumedSessionId: sessionIdOf(r.run),
        bashPwdResult: toolEnd ? (toolEnd.result as unknown) : null,
        sessionDirListing: files.map((f) => basename(f)),
      },
    });
  }
}

async function sessionKilledBeforeAssistant(ctx: Ctx): Promise<void> {
  // SIGTERM while waiting for the first response: is a session file written at all?
  for (const [name, model] of [
    ['session-hang-sigterm', 'hang'],
    ['session-hang-midstream-sigterm', 'hang-midstream'],
  ] as const) {
    const env = envFor(ctx, name);
    const r = await run(
      ctx,
      env,
      { model, prompt: 'first prompt', session: { dir: env.sessionDir } },
      {
        signal: 'SIGTERM',
        signalWhen: isEvent(model === 'hang' ? 'message_end' : 'message_update'),
        signalDelayMs: 500,
      },
    );
    const files = findSessionFiles(env.sessionDir);
    save(name, r.run, r.startedAt, {
      requests: r.requests,
      ...(files[0] ? { sessionFile: files[0] } : {}),
      meta: { model, sessionId: sessionIdOf(r.run), sessionDirListing: readdirSync(env.sessionDir) },
    });
    // And what does --session <id> say afterwards?
    const id = sessionIdOf(r.run);
    if (id) {
      const again = await run(ctx, env, {
        model: 'text',
        prompt: 'second prompt',
        session: { dir: env.sessionDir, id },
      });
      save(`${name}-resume`, again.run, again.startedAt, {
        requests: again.requests,
        meta: { triedSessionId: id, sessionDirListing: readdirSync(env.sessionDir) },
      });
    }
  }
}

const SCENARIOS: Record<string, (ctx: Ctx) => Promise<void>> = {
  text: async (ctx) => void (await simple(ctx, 'text', 'text', SAY_HELLO)),
  'text-burst': async (ctx) => void (await simple(ctx, 'text-burst', 'text-burst', SAY_HELLO)),
  thinking: async (ctx) => void (await simple(ctx, 'thinking', 'thinking', SAY_HELLO)),
  tool: async (ctx) => void (await simple(ctx, 'tool', 'tool', RUN_ECHO)),
  'tool-fail': async (ctx) => void (await simple(ctx, 'tool-fail', 'tool-fail', 'Run a failing command')),
  'two-tools': async (ctx) => void (await simple(ctx, 'two-tools', 'two-tools', 'Run two commands')),
  'text-tool-text': async (ctx) => void (await simple(ctx, 'text-tool-text', 'text-tool-text', RUN_ECHO)),
  http401: async (ctx) => void (await simple(ctx, 'http401', 'http401', SAY_HELLO)),
  http429: async (ctx) =>
    void (await simple(ctx, 'http429', 'http429', SAY_HELLO, {}, { serverSent: 'HTTP 429 with Retry-After: 7' })),
  http500: async (ctx) => void (await simple(ctx, 'http500', 'http500', SAY_HELLO)),
  http503: async (ctx) =>
    void (await simple(ctx, 'http503', 'http503', SAY_HELLO, {}, { serverSent: 'HTTP 503 with Retry-After: 3' })),
  midclose: async (ctx) => void (await simple(ctx, 'midclose', 'midclose', SAY_HELLO)),
  'hang-midstream-sigterm': (ctx) =>
    signalScenario(ctx, 'hang-midstream-sigterm', 'hang-midstream', 'SIGTERM', 'message_update', 300),
  'session-first+resume': (ctx) => sessionPair(ctx, 'session', 'text', 'first prompt', 'text', 'second prompt'),
  'session-http500': (ctx) => sessionPair(ctx, 'session-http500', 'http500', 'first prompt', 'text', 'second prompt'),
  'session-midclose': (ctx) =>
    sessionPair(ctx, 'session-midclose', 'midclose', 'first prompt', 'text', 'second prompt'),
  'session-long-tool-sigterm': (ctx) =>
    sessionPair(ctx, 'session-long-tool-sigterm', 'long-tool', 'Run a long command', 'text', 'second prompt', {
      signal: 'SIGTERM',
      signalWhen: isEvent('tool_execution_start'),
      signalDelayMs: 500,
    }),
  'session-killed-before-assistant': (ctx) => sessionKilledBeforeAssistant(ctx),
  'session-copy': (ctx) => sessionCopy(ctx),
  'auto-retry-fail': async (ctx) =>
    void (await simple(
      ctx,
      'auto-retry-fail',
      'http500',
      SAY_HELLO,
      {
        settings: { retry: { enabled: true, maxRetries: 2, baseDelayMs: 100, provider: { maxRetries: 0 } } },
      },
      { settings: { retry: { enabled: true, maxRetries: 2, baseDelayMs: 100, provider: { maxRetries: 0 } } } },
    )),
  'auto-retry-success': async (ctx) => {
    ctx.server.setScript('flaky-500-then-text', [{ status: 500 }, { text: 'Hello after a retry.' }]);
    await simple(
      ctx,
      'auto-retry-success',
      'flaky-500-then-text',
      SAY_HELLO,
      {
        settings: { retry: { enabled: true, maxRetries: 2, baseDelayMs: 100, provider: { maxRetries: 0 } } },
      },
      {
        settings: { retry: { enabled: true, maxRetries: 2, baseDelayMs: 100, provider: { maxRetries: 0 } } },
        script: '[{status:500},{text}]',
      },
    );
  },
  'http429-sdk-retry': async (ctx) =>
    void (await simple(
      ctx,
      'http429-sdk-retry',
      'http429',
      SAY_HELLO,
      {
        settings: { retry: { enabled: false, provider: { maxRetries: 1 } } },
      },
      {
        settings: { retry: { enabled: false, provider: { maxRetries: 1 } } },
        serverSent: 'HTTP 429 with Retry-After: 7 (twice)',
      },
    )),
  'project-settings-retry': async (ctx) => {
    const name = 'project-settings-retry';
    const env = envFor(ctx, name); // agent dir: retries off
    const projectSettings = { retry: { enabled: true, maxRetries: 1, baseDelayMs: 100 } };
    mkdirSync(join(env.cwd, '.pi'), { recursive: true });
    writeFileSync(join(env.cwd, '.pi', 'settings.json'), JSON.stringify(projectSettings));
    const r = await run(ctx, env, { model: 'http500', prompt: SAY_HELLO });
    save(name, r.run, r.startedAt, {
      requests: r.requests,
      meta: {
        agentSettings: JSON.parse(readFileSync(join(env.agentDir, 'settings.json'), 'utf8')) as unknown,
        projectSettings,
      },
    });
  },
  'long-tool-sigterm': (ctx) =>
    signalScenario(ctx, 'long-tool-sigterm', 'long-tool', 'SIGTERM', 'tool_execution_start', 700, 'Run a long command'),
  'long-tool-sigint': (ctx) =>
    signalScenario(ctx, 'long-tool-sigint', 'long-tool', 'SIGINT', 'tool_execution_start', 700, 'Run a long command'),
  'long-tool-grandchild-sigterm': (ctx) =>
    signalScenario(
      ctx,
      'long-tool-grandchild-sigterm',
      'long-tool-grandchild',
      'SIGTERM',
      'tool_execution_start',
      700,
      'Run a long command',
    ),
  'long-tool-grandchild-sigint': (ctx) =>
    signalScenario(
      ctx,
      'long-tool-grandchild-sigint',
      'long-tool-grandchild',
      'SIGINT',
      'tool_execution_start',
      700,
      'Run a long command',
    ),
  'long-tool-setsid-sigterm': (ctx) =>
    signalScenario(
      ctx,
      'long-tool-setsid-sigterm',
      'long-tool-setsid',
      'SIGTERM',
      'tool_execution_start',
      700,
      'Run a long command',
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
  mkdirSync(REC_ROOT, { recursive: true });
  const server = await startFakeModelServer({ scripts: EXTRA_SCRIPTS });
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
    if (existsSync(REC_ROOT)) rmSync(REC_ROOT, { recursive: true, force: true });
  }
}

await main();
