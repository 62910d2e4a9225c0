import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig, piHostOptions, workspaceConfig } from '../../../config/config.ts';
import { DEMO_MODELS, DEMO_PROVIDER, DEMO_SCRIPTS, writeDemoAgentDir } from '../../../demo/demo.ts';
import { startFakeModelServer } from '../../../demo/model-server.ts';
import { hasErrorCode } from '../../../errors.ts';
import { createSessionQueue } from '../../../runtime/queue.ts';
import { createKeys } from '../../../runtime/keys.ts';
import { ensureLocalRedis, redactUrl } from '../../../runtime/redis/index.ts';
import { SessionWorker } from '../../../runtime/worker.ts';
import { CliError, openServerContext, type ServerContext } from '../context.ts';
import { ExitCode } from '../exit-codes.ts';
import { followSession } from '../follow.ts';
import { colors } from '../present.ts';

const NO_DISCOVERY = ['--no-extensions', '--no-skills', '--no-prompt-templates', '--no-context-files'];

interface Scene {
  title: string;
  model: string;
  prompt: string;
  expect: 'completed' | 'failed' | 'cancelled';
  cancelOnTool?: boolean;
}

const SCENES: Scene[] = [
  { title: 'Streaming text', model: 'demo-stream', prompt: 'Tell me what sessiond does.', expect: 'completed' },
  { title: 'A tool call', model: 'demo-tool', prompt: 'Look around with bash.', expect: 'completed' },
  {
    title: 'A failure that is retried with backoff (HTTP 503, then success)',
    model: 'demo-flaky',
    prompt: 'Answer despite a flaky model.',
    expect: 'completed',
  },
  {
    title: 'A non-retryable failure (HTTP 401)',
    model: 'demo-auth',
    prompt: 'This one cannot succeed.',
    expect: 'failed',
  },
  {
    title: 'A cancel during a long tool (the whole process tree is stopped)',
    model: 'demo-long',
    prompt: 'Run a long job.',
    expect: 'cancelled',
    cancelOnTool: true,
  },
];

export async function serveModel(port: number): Promise<number> {
  const server = await startFakeModelServer({ port, scripts: DEMO_SCRIPTS });
  process.stdout.write(
    [
      `scripted model listening on ${server.url} (Ctrl+C to stop)`,
      `models: ${DEMO_MODELS.join(', ')} (and the test models: text, thinking, tool, http500, …)`,
      'a pi models.json entry for it:',
      JSON.stringify(
        {
          providers: {
            [DEMO_PROVIDER]: {
              baseUrl: server.url,
              api: 'openai-completions',
              apiKey: 'demo-key-not-secret',
              models: DEMO_MODELS.map((id) => ({ id })),
            },
          },
        },
        null,
        2,
      ),
      '',
    ].join('\n'),
  );
  await new Promise<void>((resolve) => {
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });
  await server.close();
  return ExitCode.ok;
}

function demoStateDir(): string {
  try {
    return loadConfig().stateDir;
  } catch (error) {
    throw new CliError(`configuration: ${(error as Error).message}`);
  }
}

export async function runDemo(): Promise<number> {
  const c = colors();
  const demoDir = join(demoStateDir(), 'demo');
  const cwd = join(demoDir, 'work');
  // The demo's sessions run in its own work dir: the workspace of its deployment policy.
  const ctx = await openServerContext({ workspace: cwd });
  const server = await startFakeModelServer({ scripts: DEMO_SCRIPTS });
  const agentDir = join(demoDir, 'agent');
  mkdirSync(cwd, { recursive: true });
  // As `sessiond worker`: each session its own workspace unless SESSIOND_WORKSPACES_ENABLED=false (then the work dir).
  const workspaces = workspaceConfig(ctx.config);
  writeDemoAgentDir(agentDir, server.url);
  const worker = new SessionWorker({
    connect: ctx.connect,
    keys: createKeys(ctx.settings.prefix),
    queue: createSessionQueue(ctx.connect('demo-queue'), createKeys(ctx.settings.prefix)),
    concurrency: 2,
    leaseTtlMs: 10_000,
    stalledIntervalMs: 5_000,
    holdBackoffMs: 10_000,
    pollMs: 250,
    heartbeatMs: 2_000,
    agentOptions: {
      pi: { ...piHostOptions(ctx.config), agentDir, sessionDir: join(demoDir, 'sessions'), extraArgs: NO_DISCOVERY },
    },
    policy: await ctx.policy(),
    ...(workspaces === null ? {} : { workspaces }),
  });
  try {
    await worker.start();
  } catch (error) {
    // A host without git: said as the worker says it, nothing left running.
    await worker.close(0);
    await server.close();
    await ctx.close();
    throw error;
  }
  process.stdout.write(
    `${c.bold('sessiond demo')}: Redis ${redactUrl(ctx.url)}, a worker in this process, real pi (${DEMO_PROVIDER} scripted model on ${server.url})\n` +
      (workspaces === null
        ? `sessions run in ${cwd} (workspaces off)\n`
        : `each session works in a workspace of its own under ${workspaces.root}, snapshotted after each batch of tool calls\n`),
  );
  const results: Array<{ scene: Scene; sessionId: string; status: string }> = [];
  try {
    for (const [i, scene] of SCENES.entries()) {
      process.stdout.write(`\n${c.bold(`${i + 1}. ${scene.title}`)}\n`);
      // With workspaces the sessions name no cwd: each gets its own.
      results.push(await play(ctx, scene, workspaces === null ? cwd : undefined));
    }
  } finally {
    await worker.close(3000);
    await server.close();
    await ctx.close();
  }
  const ok = results.every((r) => r.status === r.scene.expect);
  process.stdout.write(`\n${c.bold('Summary')}\n`);
  for (const r of results) {
    const mark = r.status === r.scene.expect ? c.green('ok ') : c.red('!! ');
    process.stdout.write(`  ${mark} ${r.sessionId.padEnd(34)} ${r.status.padEnd(10)} ${c.dim(r.scene.title)}\n`);
  }
  process.stdout.write(
    [
      '',
      'Where to look:',
      ...results.map((r) => `  npx sessiond inspect ${r.sessionId}`),
      `  npx sessiond watch ${results[2]?.sessionId ?? ''}      # the transcript, attempts and backoff included`,
      '  npx sessiond list',
      '  npx sessiond serve              # then open http://127.0.0.1:7420/ for the dashboard',
      '  npx sessiond doctor             # Redis, the workers, the agents: what is there and what to fix',
      '',
      'Next: run a worker (npx sessiond worker) and enqueue to it; docs/getting-started.md goes from here to your own',
      'provider key, repository and a second agent.',
      ...(await redisNote(ctx)),
      '',
    ].join('\n'),
  );
  return ok ? ExitCode.ok : ExitCode.failed;
}

/** Which Redis the demo used and, when sessiond started it, that it keeps running and how to stop it. */
async function redisNote(ctx: ServerContext): Promise<string[]> {
  if (ctx.settings.redisUrl !== undefined) return [`Redis: ${redactUrl(ctx.url)} (REDIS_URL), left as it was.`];
  const local = await ensureLocalRedis({ dataDir: join(ctx.settings.stateDir, 'redis') });
  if ('error' in local || local.pid === undefined) return [`Redis: ${redactUrl(ctx.url)}, one already running here.`];
  return [
    `Redis: sessiond's own redis-server on ${redactUrl(ctx.url)} (pid ${local.pid}, data in ${join(ctx.settings.stateDir, 'redis')}),`,
    `  still running for the next commands; stop it with: kill ${local.pid}`,
  ];
}

async function play(
  ctx: ServerContext,
  scene: Scene,
  cwd: string | undefined,
): Promise<{ scene: Scene; sessionId: string; status: string }> {
  const sessionId = `demo-${scene.model.replace('demo-', '')}-${Date.now().toString(36)}`;
  await ctx.client.sessions.enqueue({
    sessionId,
    prompt: scene.prompt,
    options: { provider: DEMO_PROVIDER, model: scene.model, ...(cwd === undefined ? {} : { cwd }) },
    retryPolicy: { initialDelayMs: 1000, jitter: 'none', maxAttempts: 3 },
  });
  const session = ctx.client.session(sessionId);
  const controller = new AbortController();
  let canceller: Promise<void> = Promise.resolve();
  if (scene.cancelOnTool === true) {
    canceller = (async () => {
      for (let i = 0; i < 600; i++) {
        const messages = await session.messages();
        if (messages.some((m) => m.type === 'tool.update' || m.type === 'tool.call')) {
          await new Promise((r) => setTimeout(r, 500));
          process.stdout.write(`\n${colors().yellow('→ cancel requested')}\n`);
          await session.cancel('demo: cancel during a long tool');
          return;
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
  }
  await followSession(session, { fromSeq: 1, json: false, until: 1, signal: controller.signal });
  await canceller;
  const view = await session.inspect().catch((error: unknown) => {
    if (hasErrorCode(error, 'not_found')) return null;
    throw error;
  });
  const status = view === null ? 'missing' : (view.turn?.status ?? 'unknown');
  return { scene, sessionId, status };
}
