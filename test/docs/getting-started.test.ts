import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  hasToolResult,
  startFakeAnthropicServer,
  type AnthropicRequestBody,
  type FakeAnthropicServer,
  type ScriptContext,
  type ScriptStep,
} from '../support/fake-anthropic-server.ts';
import { REPO_ROOT } from '../support/pi-env.ts';
import { freePort, startRedis, type RedisServer } from '../support/redis.ts';

/**
 * docs/getting-started.md, run as a new user would run it: every ```sh block of the page, in order,
 * in one shell state (each block's exports and `cd` carry to the next, as in one terminal), from
 * the clone's root. The HTML comment above each block says how:
 *   <!-- test: NAME [exit=N] [background] -->   run it (a `background` one is a long-running process
 *                                               kept until the end, as in a terminal of its own)
 *   <!-- test: skip (why) -->                   not run, and why
 * A block without one fails this test, so no command of the page goes unrun.
 *
 * Real parts: a redis-server on a free port (REDIS_URL: the page's later commands use the demo's
 * Redis on 6379, which a test cannot take), the real pi and Claude Code CLIs (pinned; the page's
 * `bash scripts/install-agent-clis.sh` installs Claude Code), bubblewrap where the host has it
 * (SESSIOND_SANDBOX is not set, as for a user), a fresh HOME (so `~/.pi/agent` and the state dir are
 * the test's). `npx sessiond` runs the sources (bin/sessiond-dev.mjs, as every CLI test does; the
 * compiled bundle is the package test's). What differs from a user's run are these literal
 * substitutions in the page's commands, each checked to occur:
 *   - `https://api.anthropic.com` → a fake Anthropic API on 127.0.0.1 (the only base URL);
 *   - `sk-ant-…` → a fake key (the placeholder of "your key");
 *   - `https://github.com/you/` → `file://` of a directory holding a local repository `project.git`;
 *   - `127.0.0.1:7420` → a free port (also given to `serve` as SESSIOND_HTTP_PORT);
 *   - `<session id>` → the id the previous `enqueue --follow` printed.
 * And the environment each block starts with: PATH, a fresh HOME, LANG, REDIS_URL, SESSIOND_HTTP_PORT
 * (the port above) and SESSIOND_AGENT_CLI_CACHE (this host's cache of the pinned agent CLIs, so the
 * page's install script finds them there instead of downloading them again into the fresh HOME).
 */
interface Step {
  name: string;
  line: number;
  code: string;
  exit: number;
  background: boolean;
  skip?: string;
}

const DOC = join(REPO_ROOT, 'docs', 'getting-started.md');

function steps(): Step[] {
  const lines = readFileSync(DOC, 'utf8').split('\n');
  const out: Step[] = [];
  let marker: string | null = null;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const comment = /^<!-- test: (.*) -->$/.exec(line.trim());
    if (comment !== null) {
      marker = comment[1]!;
      continue;
    }
    if (!line.startsWith('```sh')) {
      // A marker is for the block right below it (blank lines between): any other line ends it.
      if (line.trim() !== '') marker = null;
      continue;
    }
    const start = i + 1;
    const body: string[] = [];
    for (i++; i < lines.length && !lines[i]!.startsWith('```'); i++) body.push(lines[i]!);
    if (marker === null)
      throw new Error(`docs/getting-started.md:${start}: a sh block without a <!-- test: … --> line`);
    const skip = /^skip \((.+)\)$/.exec(marker);
    const words = marker.split(/\s+/);
    out.push({
      name: skip === null ? words[0]! : `skip:${start}`,
      line: start,
      code: body.join('\n'),
      exit: Number(/(?:^|\s)exit=(\d+)/.exec(marker)?.[1] ?? 0),
      background: words.includes('background'),
      ...(skip === null ? {} : { skip: skip[1]! }),
    });
    marker = null;
  }
  return out;
}

const MODEL = 'claude-sonnet-4-5';
const KEY = 'sk-ant-fake-getting-started';
const README_LINE = 'project fixture: the answer is 42';

/** The text of the last user message of a request (a string, or its text blocks). */
function lastUserText(body: AnthropicRequestBody): string {
  const user = (body.messages ?? []).filter((m) => m.role === 'user').at(-1);
  if (user === undefined) return '';
  if (typeof user.content === 'string') return user.content;
  return (user.content as Array<{ type?: string; text?: string }>)
    .filter((b) => b.type === 'text')
    .map((b) => b.text ?? '')
    .join('\n');
}

/** The text of the tool results of a request. */
function toolResultText(body: AnthropicRequestBody): string {
  const parts: string[] = [];
  for (const m of body.messages ?? []) {
    if (m.role !== 'user' || !Array.isArray(m.content)) continue;
    for (const b of m.content as Array<{ type?: string; content?: unknown }>) {
      if (b.type !== 'tool_result') continue;
      if (typeof b.content === 'string') parts.push(b.content);
      else if (Array.isArray(b.content))
        for (const c of b.content as Array<{ text?: string }>) parts.push(c.text ?? '');
    }
  }
  return parts.join('\n');
}

/** The stand-in for Anthropic's model: answers the page's prompts; reads README.md with pi's `read` tool when asked about it. */
function script(ctx: ScriptContext): ScriptStep {
  const body = ctx.body;
  if (hasToolResult(body)) {
    const line =
      toolResultText(body)
        .split('\n')
        .find((l) => l.includes('answer')) ?? '(nothing)';
    return { text: `README.md says: ${line.trim()}` };
  }
  const prompt = lastUserText(body);
  if (/README\.md/.test(prompt))
    return { text: 'Let me read it.', toolUses: [{ name: 'read', input: { path: 'README.md' } }] };
  if (/haiku about queues/.test(prompt))
    return { text: 'Jobs wait in a line / one worker takes each in turn / the lease holds its place' };
  if (/retries/.test(prompt))
    return { text: 'A 503 comes back / the backoff waits, then once more / the turn completes fine' };
  return { text: 'Hello from your own key.' };
}

describe('docs/getting-started.md, every command in order', () => {
  const all = steps();
  let redis: RedisServer;
  let anthropic: FakeAnthropicServer;
  let root: string;
  let stateDir: string;
  let port: number;
  const substitutions: Array<[string, () => string]> = [];
  const background = new Map<string, { child: ChildProcess; output: () => string }>();
  const results = new Map<string, { exitCode: number; stdout: string; stderr: string }>();
  let sessionId: string | undefined;

  beforeAll(async () => {
    [redis, anthropic, port] = await Promise.all([
      startRedis(),
      startFakeAnthropicServer({ scripts: { [MODEL]: script }, chunkDelayMs: 5 }),
      freePort(),
    ]);
    root = mkdtempSync(join(tmpdir(), 'sessiond-getting-started-'));
    stateDir = join(root, 'shell');
    mkdirSync(join(root, 'home'), { recursive: true });
    mkdirSync(stateDir);
    // "Your repository": a local one, cloned through a file:// URL.
    const repo = join(root, 'repos', 'project.git');
    mkdirSync(repo, { recursive: true });
    const git = (...args: string[]) => {
      const r = spawnSync('git', args, { cwd: repo, encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
    };
    git('init', '-q', '-b', 'main');
    writeFileSync(join(repo, 'README.md'), `# project\n\n${README_LINE}\n`);
    git('add', 'README.md');
    git('-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '-q', '-m', 'first');
    substitutions.push(
      ['https://api.anthropic.com', () => anthropic.url],
      ['sk-ant-…', () => KEY],
      ['https://github.com/you/', () => `file://${join(root, 'repos')}/`],
      ['127.0.0.1:7420', () => `127.0.0.1:${port}`],
      ['<session id>', () => sessionId ?? '(no session id yet)'],
    );
    // The shell state every block starts from: a user's environment (a fresh HOME), and npx sessiond on the sources.
    writeFileSync(
      join(stateDir, 'env.sh'),
      [
        `export PATH=${JSON.stringify(process.env.PATH ?? '/usr/bin:/bin')}`,
        `export HOME=${JSON.stringify(join(root, 'home'))}`,
        `export LANG=C.UTF-8`,
        `export REDIS_URL=${JSON.stringify(redis.url)}`,
        `export SESSIOND_HTTP_PORT=${port}`,
        // The agent CLIs' install cache of this host (the one `npm test` fills), not a download into the fresh HOME.
        `export SESSIOND_AGENT_CLI_CACHE=${JSON.stringify(
          process.env.SESSIOND_AGENT_CLI_CACHE ??
            join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'sessiond', 'agent-clis'),
        )}`,
        '',
      ].join('\n'),
    );
    writeFileSync(join(stateDir, 'cwd'), REPO_ROOT);
  }, 120_000);

  afterAll(async () => {
    for (const { child } of background.values()) await stop(child);
    await Promise.all([redis?.stop(), anthropic?.close()]);
    if (root !== undefined) rmSync(root, { recursive: true, force: true });
  });

  function script_(step: Step): string {
    let code = step.code;
    for (const [from, to] of substitutions) code = code.split(from).join(to());
    const dev = join(REPO_ROOT, 'bin', 'sessiond-dev.mjs');
    return [
      `source ${JSON.stringify(join(stateDir, 'env.sh'))}`,
      `cd "$(cat ${JSON.stringify(join(stateDir, 'cwd'))})"`,
      `npx() { if [ "$1" = sessiond ]; then shift; node ${JSON.stringify(dev)} "$@"; else command npx "$@"; fi; }`,
      // Each block's exports and cwd carry to the next, as in one terminal.
      `trap 'export -p > ${JSON.stringify(join(stateDir, 'env.sh'))}; pwd > ${JSON.stringify(join(stateDir, 'cwd'))}' EXIT`,
      'set -e',
      code,
    ].join('\n');
  }

  function run(step: Step): Promise<{ exitCode: number; stdout: string; stderr: string }> {
    return new Promise((resolve, reject) => {
      const child = spawn('bash', ['-c', script_(step)], { env: {}, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('error', reject);
      child.on('close', (code) => resolve({ exitCode: code ?? -1, stdout, stderr }));
    });
  }

  async function start(step: Step, until: RegExp): Promise<void> {
    const running = background.get(step.name);
    if (running !== undefined) await stop(running.child);
    const child = spawn('bash', ['-c', script_(step)], { env: {}, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let output = '';
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    background.set(step.name, { child, output: () => output });
    await new Promise<void>((resolve, reject) => {
      const check = setInterval(() => {
        if (until.test(output)) {
          clearInterval(check);
          resolve();
        } else if (child.exitCode !== null) {
          clearInterval(check);
          reject(new Error(`${step.name} exited ${child.exitCode}:\n${output}`));
        }
      }, 100);
    });
  }

  async function stop(child: ChildProcess): Promise<void> {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    process.kill(-child.pid!, 'SIGTERM');
    const timer = setTimeout(() => {
      // Still there after the worker's shutdown grace: its whole group goes.
      if (child.exitCode === null) process.kill(-child.pid!, 'SIGKILL');
    }, 20_000);
    await exited;
    clearTimeout(timer);
  }

  /** What the page says each step prints or does. */
  const CHECKS: Record<string, (r: { exitCode: number; stdout: string; stderr: string }) => void> = {
    version: (r) =>
      expect(r.stdout.trim()).toBe(JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')).version),
    demo: (r) => {
      expect(r.stdout.match(/^ {2}ok /gm)).toHaveLength(5);
      expect(r.stdout).toContain('npx sessiond doctor');
      expect(r.stdout).toContain('docs/getting-started.md');
    },
    'doctor-before': (r) => {
      expect(r.stdout).toMatch(/^redis: redis:\/\/127\.0\.0\.1:\d+\/0, Redis \d+\.\d+\.\d+ \(standalone\)$/m);
      expect(r.stdout).toMatch(/✗ no worker has ever sent a heartbeat to this Redis/);
      expect(r.stdout).toMatch(/→ start one: sessiond worker/);
    },
    key: () => {
      const models = JSON.parse(readFileSync(join(root, 'home', '.pi', 'agent', 'models.json'), 'utf8'));
      expect(models).toEqual({ providers: { anthropic: { baseUrl: anthropic.url, apiKey: 'ANTHROPIC_API_KEY' } } });
    },
    clis: (r) =>
      expect(r.stdout).toMatch(/^claude-code\n {2}command: claude\n {2}version: 2\.1\.332 \(Claude Code\)$/m),
    run: (r) => {
      expect(r.stdout.match(/Hello from your own key\./g)).toHaveLength(2);
      expect(r.stderr.match(/^session: \S+$/gm)).toHaveLength(2);
      // Both agents' requests reached "Anthropic" with the key, through the bridge or not.
      expect(anthropic.requests.length).toBeGreaterThanOrEqual(2);
      for (const request of anthropic.requests) expect(request.headers['x-api-key']).toBe(KEY);
    },
    doctor: (r) => {
      expect(r.stdout).toMatch(/^workers: 1 live$/m);
      expect(r.stdout).toMatch(/^ {2}● .*; agents .*\bclaude-code\b/m);
      expect(r.stdout).toMatch(/^ {2}● .*; agents .*\bpi\b/m);
      expect(r.stdout).toMatch(/^workspaces: on, root .*\/workspaces, store .*\/workspace-store\.git; git version \d/m);
      expect(r.stdout).toMatch(/^callers may choose: pi, claude-code$/m);
    },
    'first-session': (r) => {
      sessionId = /session (\S+), turn 1/.exec(r.stderr)?.[1];
      expect(sessionId).toBeDefined();
      expect(r.stdout).toContain('Jobs wait in a line');
      expect(r.stdout).toMatch(/── attempt 1 completed/);
      expect(r.stdout).toMatch(/turn 1: completed/);
    },
    'first-session-more': (r) => {
      expect(r.stdout).toMatch(new RegExp(`${sessionId}.*completed`));
      expect(r.stdout).toContain('Write a haiku about queues');
      expect(r.stdout).toContain('the backoff waits');
      expect(r.stdout).toMatch(/turn 2: completed/);
    },
    repo: (r) => {
      expect(r.stdout).toMatch(/⚙ read/);
      expect(r.stdout).toContain(`README.md says: ${README_LINE}`);
      // The file reached the model as the tool's result: pi read it in the clone.
      expect(anthropic.requests.some((q) => toolResultText(q.body).includes(README_LINE))).toBe(true);
    },
    'second-agent': (r) => {
      expect(r.stdout).toContain('Hello from your own key.');
      expect(r.stdout).toMatch(/turn 1: completed/);
    },
    readyz: (r) => expect(JSON.parse(r.stdout)).toMatchObject({ status: 'ready', workers: 1 }),
  };
  /** Steps whose check is asynchronous (it asks the running processes). */
  const ASYNC_CHECKS: Record<string, () => Promise<void>> = {
    // The dashboard answers, and its API lists the page's sessions: pi's two (one on the repository) and Claude Code's.
    readyz: async () => {
      const page = await fetch(`http://127.0.0.1:${port}/`);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('<title>sessiond</title>');
      const list = (await (await fetch(`http://127.0.0.1:${port}/api/sessions`)).json()) as {
        sessions: Array<{ sessionId: string; state: string; agent: string }>;
      };
      const completed = list.sessions.filter((x) => x.state === 'completed');
      expect(completed.find((x) => x.sessionId === sessionId)?.agent).toBe('pi');
      expect(completed.filter((x) => x.agent === 'claude-code')).toHaveLength(1);
    },
  };
  const UNTIL: Record<string, RegExp> = {
    worker: /"msg":"worker started"/,
    serve: /sessiond serving http:\/\/127\.0\.0\.1:\d+/,
  };

  it('marks every block, and every substitution occurs in a block it runs', () => {
    const run = all.filter((s) => s.skip === undefined);
    expect(run.map((s) => s.name)).toEqual([
      'version',
      'demo',
      'doctor-before',
      'key',
      'clis',
      'run',
      'deployment',
      'worker',
      'doctor',
      'first-session',
      'first-session-more',
      'repo',
      'second-agent',
      'serve',
      'readyz',
    ]);
    const text = run.map((s) => s.code).join('\n');
    for (const from of [
      'https://api.anthropic.com',
      'sk-ant-…',
      'https://github.com/you/',
      '127.0.0.1:7420',
      '<session id>',
    ])
      expect(text).toContain(from);
  });

  for (const step of all) {
    if (step.skip !== undefined) continue;
    it(`${step.name} (docs/getting-started.md:${step.line})`, async () => {
      if (step.background) {
        await start(step, UNTIL[step.name]!);
        return;
      }
      const result = await run(step);
      results.set(step.name, result);
      expect(result.exitCode, `${result.stdout}\n${result.stderr}`).toBe(step.exit);
      CHECKS[step.name]?.(result);
      await ASYNC_CHECKS[step.name]?.();
    }, 300_000);
  }
});
