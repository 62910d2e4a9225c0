import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../support/pi-env.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';

/**
 * sessiond as a user installs it: `npm pack` (which builds), the tarball installed into a new
 * project with sessiond's production dependencies only, the README's "Use it from TypeScript"
 * program type-checked with `tsc --strict` and run against a real redis-server, and the installed
 * `sessiond` executable, with no tsx anywhere in that project.
 */

const run = promisify(execFile);
const TSC = join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
let redis: RedisServer;
let work: string;
let project: string;
/** The session the README's program completes (read by the executable's test after it). */
let programSession: string | undefined;

/** The ```ts block of the README's "Use it from TypeScript" section. */
function readmeExample(): string {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
  const section = readme.split('\n## Use it from TypeScript\n')[1]?.split('\n## ')[0];
  const code = section?.match(/```ts\n([\s\S]*?)\n```/)?.[1];
  if (code === undefined) throw new Error('README.md has no ```ts block under "## Use it from TypeScript"');
  return `${code}\n`;
}

/** Uses every public type, so that `tsc --strict` checks they are exported and fit together. */
const TYPES_PROBE = `import type { CliMessage, Client, FailureCategory, MachineState, RetryPolicy, SessionHandle, SessionState, SessionView, StoredMessage, Worker, WorkerEvents } from 'sessiond';
import { CliMessageSchema, ConflictError, ERROR_CODES, FAILURE_CATEGORIES, InputError, NotFoundError, QuotaError, SESSION_STATES } from 'sessiond';

export const category: FailureCategory = FAILURE_CATEGORIES[0];
export const states: readonly SessionState[] = SESSION_STATES;
// The machine's state names are a union of literals, not just string.
export const running: MachineState = 'running';
// @ts-expect-error a state the machine does not have
export const bogus: MachineState = 'sleeping';
export function textOf(message: CliMessage): string | null {
  return message.type === 'assistant' ? message.content.text : null;
}
export function seqOf(message: StoredMessage): number {
  return message.seq + message.turn + message.attempt;
}
export function attempts(view: SessionView, policy: RetryPolicy): number {
  return Math.min(view.lastSeq, policy.maxAttempts);
}
export const parsed = CliMessageSchema.safeParse({ type: 'assistant', content: { text: 'x' } }).success;
export const codes: string[] = [new InputError([{ field: 'prompt', message: 'x' }]).code, new NotFoundError('x').code, new ConflictError('x').code, new QuotaError('maxQueuedPrompts', 1, 'x').code, ERROR_CODES[0]];
export type Surfaces = [SessionHandle['watch'], ReturnType<Client['session']>, Client['sessions']['enqueue'], Worker['on'], WorkerEvents['attemptFailed']];
`;

beforeAll(async () => {
  redis = await startRedis();
  work = mkdtempSync(join(tmpdir(), 'sessiond-package-'));
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', work], {
    cwd: REPO_ROOT,
    maxBuffer: 64 * 1024 * 1024,
    timeout: 300_000,
  });
  const [packed] = JSON.parse(stdout.slice(stdout.indexOf('['))) as Array<{
    filename: string;
    files: Array<{ path: string }>;
  }>;
  if (packed === undefined) throw new Error('npm pack printed no package');
  project = join(work, 'consumer');
  mkdirSync(join(project, 'src'), { recursive: true });
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({ name: 'consumer', version: '1.0.0', private: true, type: 'module' }),
  );
  // Production dependencies only; the registry is reachable, its cache warm.
  await run(
    'npm',
    ['install', '--omit=dev', '--no-audit', '--no-fund', '--prefer-offline', join(work, packed.filename)],
    {
      cwd: project,
      timeout: 300_000,
      maxBuffer: 64 * 1024 * 1024,
    },
  );
  writeFileSync(join(project, 'src', 'main.ts'), readmeExample());
  writeFileSync(join(project, 'src', 'types.ts'), TYPES_PROBE);
  writeFileSync(
    join(project, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'nodenext',
        moduleResolution: 'nodenext',
        strict: true,
        noUncheckedIndexedAccess: true,
        outDir: 'dist',
        rootDir: 'src',
        // Node's types from sessiond's checkout: the consumer installs nothing but sessiond.
        typeRoots: [join(REPO_ROOT, 'node_modules', '@types')],
        // As most projects do: the dependencies' own .d.ts are not re-checked; every use of sessiond's types is.
        skipLibCheck: true,
        types: ['node'],
      },
      include: ['src'],
    }),
  );
}, 600_000);

afterAll(async () => {
  await redis?.stop();
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

describe('the npm package', () => {
  it('installs with production dependencies only: compiled code and types, no sources, no tsx', () => {
    const installed = join(project, 'node_modules', 'sessiond');
    expect(existsSync(join(installed, 'dist', 'src', 'index.js'))).toBe(true);
    expect(existsSync(join(installed, 'dist', 'src', 'index.d.ts'))).toBe(true);
    expect(existsSync(join(installed, 'dist', 'src', 'interfaces', 'web', 'index.html'))).toBe(true);
    expect(existsSync(join(installed, 'dist', 'cli', 'fast.js'))).toBe(true);
    expect(existsSync(join(installed, 'src'))).toBe(false);
    expect(existsSync(join(installed, 'test'))).toBe(false);
    expect(existsSync(join(project, 'node_modules', 'tsx'))).toBe(false);
    expect(existsSync(join(project, 'node_modules', 'typescript'))).toBe(false);
  });

  it("type-checks the README's program and the public types with tsc --strict", async () => {
    const result = await run(process.execPath, [TSC, '-p', project], { cwd: project, timeout: 180_000 }).catch(
      (error: { stdout?: string; stderr?: string }) => error,
    );
    expect('stdout' in result ? `${result.stdout ?? ''}${result.stderr ?? ''}` : '').toBe('');
    expect(existsSync(join(project, 'dist', 'main.js'))).toBe(true);
  }, 200_000);

  it("runs the README's program: a worker with the consumer's own agent completes a session, and watch streams its messages", async () => {
    // This file's own redis-server: the program's default prefix is nobody else's.
    const env = { PATH: process.env.PATH ?? '', HOME: work, REDIS_URL: redis.url };
    const { stdout } = await run(process.execPath, [join(project, 'dist', 'main.js')], {
      cwd: project,
      env,
      timeout: 120_000,
    });
    expect(stdout.match(/^HELLO!$/gm)).toHaveLength(2);
    expect(stdout).toMatch(/^turn 1 of [0-9a-f-]{36}: completed$/m);
    programSession = /^turn 1 of ([0-9a-f-]{36}): completed$/m.exec(stdout)![1]!;
    expect(stdout).toContain(
      'state completed; messages 1:session.started 2:assistant 3:assistant 4:terminal.completed',
    );
    expect(stdout).toContain('not found: unknown session "no-such-session"');
  }, 150_000);

  it('the installed sessiond executable answers --help without tsx', async () => {
    const bin = join(project, 'node_modules', '.bin', 'sessiond');
    const { stdout } = await run(bin, ['--help'], {
      cwd: project,
      env: { PATH: process.env.PATH ?? '' },
      timeout: 60_000,
    });
    expect(stdout).toContain('Usage: sessiond');
    expect(stdout).toContain('inspect');
  }, 70_000);

  it("the installed executable's fast commands (its bundle) inspect and list the program's session", async () => {
    expect(programSession).toBeDefined();
    const bin = join(project, 'node_modules', '.bin', 'sessiond');
    const env = { PATH: process.env.PATH ?? '', HOME: work, REDIS_URL: redis.url };
    const inspect = await run(bin, ['inspect', programSession!, '--json'], { cwd: project, env, timeout: 60_000 });
    expect(JSON.parse(inspect.stdout)).toMatchObject({
      sessionId: programSession,
      state: 'completed',
      turn: { status: 'completed' },
    });
    const list = await run(bin, ['list', '--json'], { cwd: project, env, timeout: 60_000 });
    expect(JSON.parse(list.stdout)).toContainEqual({ sessionId: programSession, state: 'completed' });
    const unknown = await run(bin, ['inspect', 'no-such-session'], { cwd: project, env, timeout: 60_000 }).catch(
      (error: { code?: unknown; stderr?: string }) => error,
    );
    expect(unknown).toMatchObject({ code: 3, stderr: 'sessiond: unknown session "no-such-session"\n' });
  }, 70_000);
});
