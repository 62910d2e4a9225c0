/**
 * Records the session files that the Codex and Gemini CLIs write during a turn of tool calls, for the unit
 * tests of their cuts (`codexStateAfterTool`, `geminiStateAfterTool`): the real `codex` (0.171.0) and `gemini`
 * (0.61.0) against their fake APIs on 127.0.0.1.
 *
 *   node --import tsx test/agents/record-session-cuts.ts
 *
 * Per agent and scenario, into test/fixtures/<agent>/session-cuts/: `<scenario>.stdout.jsonl` (the CLI's stdout,
 * byte for byte) and `<scenario>.session.jsonl` (its session file once it exited: Codex's rollout, Gemini's chat
 * file). Scenarios: `cancel-second-tool` (one tool call completes, a second one runs `sleep` and gets SIGINT one
 * second after it started) and `two-tools` (two calls in one model response, then a text). See the README
 * of each fixture folder.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { prepareManagedCodexHome } from '../../src/agents/codex/home.ts';
import { codexArgs, CodexOptionsSchema } from '../../src/agents/codex/options.ts';
import { providerArgs } from '../../src/agents/codex/provider-config.ts';
import { startFakeGeminiServer } from '../support/fake-gemini-server.ts';
import { startFakeResponsesServer } from '../support/fake-responses-server.ts';
import { codexOptions, createCodexEnv, REPO_ROOT } from './codex/codex-env.ts';
import { createGeminiEnv, geminiBin, RECORDING_SETTINGS } from './gemini/gemini-env.ts';

const REC_ROOT = '/tmp/sessiond-cut-rec';

const SCENARIOS: Record<string, { commands: string[][]; interrupt: boolean }> = {
  // One command per model response; the second is interrupted.
  'cancel-second-tool': {
    commands: [['echo three > d.txt; printf ok0'], ['echo half >> c.txt; sleep 600; printf ok1']],
    interrupt: true,
  },
  // Two commands in one model response.
  'two-tools': { commands: [['echo one > one.txt; printf ok0', 'echo two > two.txt; printf ok1']], interrupt: false },
};

/** The model's next step: the first response whose outputs the request does not hold yet, else a text. */
function next(body: unknown, commands: string[][]): string[] | null {
  const json = JSON.stringify(body);
  let seen = 0;
  for (const batch of commands) {
    if (!batch.every((_, i) => json.includes(`ok${seen + i}`))) return batch;
    seen += batch.length;
  }
  return null;
}

interface Run {
  stdout: string;
  session: string;
}

function run(
  command: string,
  args: string[],
  opts: { cwd: string; env: Record<string, string>; prompt: string; interrupt: boolean; sessionFile: () => string },
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: opts.cwd, env: opts.env, stdio: ['pipe', 'pipe', 'inherit'] });
    child.stdin.end(opts.prompt);
    let stdout = '';
    let pending = '';
    let started = 0;
    const killer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (data: string) => {
      stdout += data;
      pending += data;
      for (let nl = pending.indexOf('\n'); nl >= 0; nl = pending.indexOf('\n')) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        // The second tool call started (Codex: item.started; Gemini: tool_use): interrupt it a second later.
        if (opts.interrupt && /"item\.started"|"tool_use"/.test(line) && ++started === 2)
          setTimeout(() => child.kill('SIGINT'), 1000);
      }
    });
    child.once('error', reject);
    child.once('close', () => {
      clearTimeout(killer);
      resolve({ stdout, session: opts.sessionFile() });
    });
  });
}

function onlyFile(dir: string, test: (name: string) => boolean): string {
  const names = readdirSync(dir, { recursive: true }).map(String).filter(test);
  if (names.length !== 1) throw new Error(`expected one session file under ${dir}, found ${names.join(', ')}`);
  return readFileSync(join(dir, names[0] as string), 'utf8');
}

function save(agent: string, scenario: string, result: Run): void {
  const dir = join(REPO_ROOT, 'test', 'fixtures', agent, 'session-cuts');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${scenario}.stdout.jsonl`), result.stdout);
  writeFileSync(join(dir, `${scenario}.session.jsonl`), result.session);
  console.log(
    `${agent} ${scenario}: ${result.stdout.split('\n').length - 1} stdout lines, ${result.session.length} bytes`,
  );
}

async function recordCodex(): Promise<void> {
  const server = await startFakeResponsesServer();
  try {
    for (const [scenario, spec] of Object.entries(SCENARIOS)) {
      server.setScript(scenario, ({ body }) => {
        const batch = next(body, spec.commands);
        if (batch === null) return { text: 'Done.' };
        return { functionCalls: batch.map((cmd) => ({ name: 'exec_command', arguments: { cmd } })) };
      });
      const env = createCodexEnv({ root: join(REC_ROOT, 'codex', scenario) });
      const options = CodexOptionsSchema.parse(
        // Codex's own sandbox needs helpers it does not make under /tmp: the tools run without it.
        codexOptions(env, server.urlFor(scenario), { prompt: 'Run the commands.', sandbox: 'danger-full-access' }),
      );
      const home = await prepareManagedCodexHome(env.userCodexHome, env.stateDir);
      const provider = providerArgs(options, home.userConfig);
      if (!provider.ok) throw new Error(provider.error);
      const result = await run(options.command ?? 'codex', codexArgs(options, provider.args), {
        cwd: env.cwd,
        env: { ...env.env, CODEX_HOME: home.path },
        prompt: options.prompt,
        interrupt: spec.interrupt,
        sessionFile: () => onlyFile(join(home.path, 'sessions'), (name) => name.endsWith('.jsonl')),
      });
      save('codex', scenario, result);
    }
  } finally {
    await server.close();
  }
}

async function recordGemini(): Promise<void> {
  const server = await startFakeGeminiServer();
  try {
    for (const [scenario, spec] of Object.entries(SCENARIOS)) {
      server.setScript(scenario, ({ body }) => {
        const batch = next(body, spec.commands);
        if (batch === null) return { text: 'Done.' };
        return {
          functionCalls: batch.map((command) => ({ name: 'run_shell_command', args: { command, description: 'Run' } })),
        };
      });
      const env = createGeminiEnv({
        serverUrl: server.url,
        root: join(REC_ROOT, 'gemini', scenario),
        userSettings: RECORDING_SETTINGS as unknown as Record<string, unknown>,
      });
      const args = ['--output-format', 'stream-json', '--model', scenario, '--skip-trust', '--approval-mode', 'yolo'];
      const result = await run(geminiBin, args, {
        cwd: env.cwd,
        env: { ...env.env, GEMINI_CLI_NO_RELAUNCH: 'true' },
        prompt: 'Run the commands.',
        interrupt: spec.interrupt,
        sessionFile: () => onlyFile(join(env.configDir, 'tmp'), (name) => /chats\/session-.*\.jsonl$/.test(name)),
      });
      save('gemini', scenario, result);
    }
  } finally {
    await server.close();
  }
}

rmSync(REC_ROOT, { recursive: true, force: true });
mkdirSync(REC_ROOT, { recursive: true });
await recordCodex();
await recordGemini();
rmSync(REC_ROOT, { recursive: true, force: true });
