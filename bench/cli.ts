import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { startRedis } from '../test/support/redis.ts';
import { BenchFailure } from './support/benchmark.ts';
import { buildCheckout } from './support/harness.ts';
import { median, round } from './support/timing.ts';

/**
 * How fast the CLI answers: the wall time of `sessiond inspect ID` (against a real redis-server,
 * one stored session) and of `sessiond --help`, each a fresh `node bin/sessiond.mjs …` process as an
 * operator runs it, against `node -e 0` (the bare start of Node on this machine), paired: every round
 * runs the three once, in a rotating order, so a busy moment of the shared machine hits all three.
 * Medians of ROUNDS rounds after WARMUP rounds. ratio = inspectMs / nodeMs.
 *
 * The bin is the checkout's `bin/sessiond.mjs` (BENCH_CLI_BIN for another); when the package has a
 * build script it is run first, so the compiled CLI measured is the one these sources give.
 * Target: inspect ≤ 250 ms and ≤ 6 × node.
 */
export const name = 'cli';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const BIN = process.env.BENCH_CLI_BIN ?? join(ROOT, 'bin', 'sessiond.mjs');
const ROUNDS = Number(process.env.BENCH_CLI_ROUNDS ?? 20);
const WARMUP = 2;
const TIMEOUT_MS = 30_000;

function timeProcess(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  expect: (stdout: string) => boolean,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), TIMEOUT_MS);
    child.once('error', reject);
    child.once('close', (code, signal) => {
      const ms = performance.now() - started;
      clearTimeout(timer);
      if (code !== 0)
        reject(new BenchFailure(`node ${args.join(' ')} exited with ${code ?? signal}: ${stderr.slice(-500)}`));
      else if (!expect(stdout))
        reject(new BenchFailure(`node ${args.join(' ')} printed something else: ${stdout.slice(0, 300)}`));
      else resolve(ms);
    });
  });
}

export async function run(log: (line: string) => void = console.log): Promise<Record<string, unknown>> {
  if (process.env.BENCH_CLI_BIN === undefined) buildCheckout(ROOT);
  if (!existsSync(BIN)) throw new BenchFailure(`no ${BIN}`);
  const redis = await startRedis();
  try {
    const prefix = `bench-cli-${process.pid}`;
    // One stored session, written as `enqueue` writes it (the bin's own enqueue: no import of the runtime here).
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      REDIS_URL: redis.url,
      SESSIOND_PREFIX: prefix,
      SESSIOND_LOG_LEVEL: 'silent',
    };
    const sessionId = 'bench-cli-session';
    await timeProcess([BIN, 'enqueue', '--session', sessionId, 'hello'], env, (out) => out.includes(sessionId));
    const commands: Array<{ key: 'node' | 'help' | 'inspect'; args: string[]; expect: (stdout: string) => boolean }> = [
      { key: 'node', args: ['-e', '0'], expect: () => true },
      { key: 'help', args: [BIN, '--help'], expect: (out) => out.includes('Usage: sessiond') },
      { key: 'inspect', args: [BIN, 'inspect', sessionId], expect: (out) => out.includes(sessionId) },
    ];
    const samples = { node: [] as number[], help: [] as number[], inspect: [] as number[] };
    for (let round_ = 0; round_ < WARMUP + ROUNDS; round_ += 1) {
      for (let i = 0; i < commands.length; i += 1) {
        const command = commands[(round_ + i) % commands.length]!;
        const ms = await timeProcess(command.args, env, command.expect);
        if (round_ >= WARMUP) samples[command.key].push(ms);
      }
    }
    const nodeMs = median(samples.node);
    const helpMs = median(samples.help);
    const inspectMs = median(samples.inspect);
    const ratio = inspectMs / nodeMs;
    log(`bin: ${BIN}; ${ROUNDS} paired rounds (after ${WARMUP} warm-up), medians of wall time per process`);
    log(`node -e 0          ${nodeMs.toFixed(1)} ms`);
    log(`sessiond --help    ${helpMs.toFixed(1)} ms  (${(helpMs / nodeMs).toFixed(2)} × node)`);
    log(
      `sessiond inspect   ${inspectMs.toFixed(1)} ms  (${ratio.toFixed(2)} × node; target ≤ 250 ms and ≤ 6 ×: ${inspectMs <= 250 && ratio <= 6 ? 'met' : 'NOT met'})`,
    );
    return {
      bench: name,
      inspectMs: round(inspectMs, 1),
      helpMs: round(helpMs, 1),
      nodeMs: round(nodeMs, 1),
      ratio: round(ratio, 2),
    };
  } finally {
    await redis.stop();
  }
}
