import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Runtime } from '../src/runtime/runtime.ts';
import { createSessionQueue } from '../src/runtime/queue.ts';
import { createKeys } from '../src/runtime/keys.ts';
import { deploymentPolicy } from '../src/runtime/deployment-policy.ts';
import { SessionWorker, WORKER_DEFAULTS } from '../src/runtime/worker.ts';
import { createRedis } from '../src/runtime/redis/connection.ts';
import { DEFAULT_WORKSPACE_EXCLUDE } from '../src/workspace/index.ts';
import { startFakeModelServer, type ScriptFn } from '../test/support/fake-model-server.ts';
import { createPiEnv, NO_DISCOVERY, piBin } from '../test/support/pi-env.ts';
import { startRedis, uniquePrefix } from '../test/support/redis.ts';
import { BenchFailure } from './support/benchmark.ts';
import { tempDir, type Cleanup } from './support/harness.ts';
import { median, round } from './support/timing.ts';

/**
 * attemptOverhead: an attempt's added latency with workspaces on vs off. One in-process worker,
 * real pi against the fake model (one bash tool call, then a text answer), real Redis and git; the
 * session's directory holds FILES files (made by its first turn, not measured). Each measured
 * turn is one attempt of one tool call (`echo r >> log.txt`); the figure is the median turn time
 * (enqueue → turn ended) with workspaces on ÷ off, minus 1, the two sessions' turns alternating.
 * `snapshotsPerTurn`: the snapshots the measured turns added to the store, per turn (1: the tool
 * batch's, reused at the completed end), a figure the host's load does not blur.
 */
const FILES = Number(process.env.BENCH_WORKSPACE_ATTEMPT_FILES ?? 10_000);
const TURNS = Number(process.env.BENCH_WORKSPACE_ATTEMPT_TURNS ?? 8);
const MODEL = 'bench-ws-tool';

/** `RUN: cmd` → a bash tool call running cmd; after its result → text. */
const toolModel: ScriptFn = ({ body }) => {
  const messages = body.messages ?? [];
  const last = messages.at(-1);
  if (last?.role !== 'user') return { text: 'Done.', chunkDelayMs: 0 };
  const text = JSON.stringify(last.content);
  const command = /RUN: (.*?)"/.exec(text)?.[1] ?? 'true';
  return {
    toolCalls: [{ id: `call_b_${messages.length}`, name: 'bash', arguments: { command } }],
    chunkDelayMs: 0,
  };
};

export async function measureAttemptOverhead(
  cleanup: Cleanup,
  log: (line: string) => void,
): Promise<{
  attemptOverhead: number;
  turnOnMs: number;
  turnOffMs: number;
  snapshotsPerTurn: number;
  files: number;
  turns: number;
}> {
  const dir = tempDir('sessiond-bench-ws-attempt-', cleanup);
  const redis = await startRedis();
  cleanup.add('redis', () => redis.stop());
  const server = await startFakeModelServer({ scripts: { [MODEL]: toolModel } });
  cleanup.add('model server', () => server.close());
  const env = createPiEnv({ serverUrl: server.url, extraModels: [MODEL] });
  cleanup.add('pi env', () => env.cleanup());
  const prefix = uniquePrefix('bench-ws');
  const connections: Array<ReturnType<typeof createRedis>> = [];
  const connect = (role: string) => {
    const c = createRedis(redis.url, { role, maxRetriesPerRequest: null, log: () => undefined });
    connections.push(c);
    return c;
  };
  cleanup.add('connections', () => {
    for (const c of connections) c.disconnect();
  });
  const offRoot = join(dir, 'off');
  mkdirSync(offRoot, { recursive: true });
  const policy = deploymentPolicy({ workspace: offRoot });
  const runtime = new Runtime({ connect, prefix, policy });
  cleanup.add('runtime', () => runtime.close());
  const stateDir = join(dir, 'state');
  const store = join(stateDir, 'workspace-store.git');
  const keys = createKeys(prefix);
  const worker = new SessionWorker({
    connect,
    keys,
    queue: createSessionQueue(connect('worker-queue'), keys),
    ...WORKER_DEFAULTS,
    concurrency: 2,
    pollMs: 250,
    policy,
    agentOptions: {
      pi: {
        command: piBin,
        agentDir: env.agentDir,
        sessionDir: join(stateDir, 'pi'),
        extraArgs: NO_DISCOVERY,
        env: { ...env.env, SESSIOND_STATE_DIR: stateDir },
      },
    },
    workspaces: {
      root: join(dir, 'workspaces'),
      gitDir: join(stateDir, 'workspace-git'),
      store,
      exclude: DEFAULT_WORKSPACE_EXCLUDE,
      maxBytes: 0,
      maxSnapshots: 0,
    },
  });
  await worker.start();
  cleanup.add('worker', () => worker.close(2000));

  const until = async (sessionId: string, turn: number): Promise<void> => {
    const deadline = Date.now() + 120_000;
    for (;;) {
      const view = await runtime.getSession(sessionId);
      const t = view?.context?.turn;
      if (t?.index === turn && ['completed', 'failed', 'cancelled'].includes(t.status)) {
        if (t.status !== 'completed') throw new BenchFailure(`turn ${turn} of ${sessionId} ended ${t.status}`);
        return;
      }
      if (Date.now() > deadline) throw new BenchFailure(`turn ${turn} of ${sessionId} did not end`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  const make = `mkdir -p d && for i in $(seq 1 ${FILES}); do echo "file $i" > d/f$i.txt; done`;
  const options = { provider: 'fake', model: MODEL };
  const on = await runtime.enqueue({ prompt: `RUN: ${make}`, options });
  const offDir = join(offRoot, 'session');
  mkdirSync(offDir, { recursive: true });
  const off = await runtime.enqueue({ prompt: `RUN: ${make}`, options: { ...options, cwd: offDir } });
  await until(on.sessionId, 1);
  await until(off.sessionId, 1);
  log(`  workspace attempt: ${FILES} files made in both sessions; ${TURNS} turns each, alternating`);
  // The session's snapshots: the parents of its index commit in the store (docs/workspaces.md).
  const snapshots = (): number =>
    execFileSync(
      'git',
      ['--git-dir', store, 'rev-parse', `refs/sessiond/${Buffer.from(on.sessionId).toString('hex')}^@`],
      {
        encoding: 'utf8',
      },
    )
      .split('\n')
      .filter((line) => line !== '').length;
  const before = snapshots();
  const times: Record<'on' | 'off', number[]> = { on: [], off: [] };
  for (let t = 2; t < TURNS + 2; t++) {
    const order = t % 2 === 0 ? (['on', 'off'] as const) : (['off', 'on'] as const);
    for (const side of order) {
      const sessionId = side === 'on' ? on.sessionId : off.sessionId;
      const start = performance.now();
      await runtime.enqueue({ sessionId, prompt: `RUN: echo ${t} >> log.txt` });
      await until(sessionId, t);
      times[side].push(performance.now() - start);
    }
  }
  const snapshotsPerTurn = round((snapshots() - before) / TURNS, 2);
  const turnOnMs = round(median(times.on), 1);
  const turnOffMs = round(median(times.off), 1);
  const attemptOverhead = round(turnOnMs / turnOffMs - 1, 3);
  log(
    `  attempt with workspaces on ${turnOnMs} ms, off ${turnOffMs} ms: overhead ${(attemptOverhead * 100).toFixed(1)} %; ` +
      `${snapshotsPerTurn} snapshots per turn`,
  );
  return { attemptOverhead, turnOnMs, turnOffMs, snapshotsPerTurn, files: FILES, turns: TURNS };
}
