/**
 * Records what real ACP agents print on stdout (JSON-RPC lines, byte for byte) for one sessiond
 * attempt, into test/fixtures/acp/<agent>-<scenario>.stdout.jsonl (the list of an
 * `available_commands_update` emptied, see withoutCommandList):
 *
 *   node --import tsx test/agents/acp/record-acp-transcripts.ts [gemini|qwen|opencode|claude …]
 *
 * The client side is the SDK's, as in src/agents/acp/provider.ts: initialize, session/new, one
 * session/prompt, permission requests answered allow_once. Gemini CLI 0.61.0 (`gemini --acp`)
 * against the fake Gemini API, Qwen Code 0.24.4 (`qwen --acp`) and OpenCode 1.18.33 (`opencode acp`)
 * against the fake OpenAI API, the Claude Code ACP adapter 0.101.0 (`claude-agent-acp`) against the
 * fake Anthropic API (configured as in acp-clis.ts; the client advertises `session.notices`, as
 * sessiond does).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import * as acp from '@agentclientprotocol/sdk';
import { startFakeGeminiServer, geminiBuiltinScripts } from '../../support/fake-gemini-server.ts';
import { startFakeAnthropicServer } from '../../support/fake-anthropic-server.ts';
import { startFakeModelServer } from '../../support/fake-model-server.ts';
import { claudeAcpEnv, OPENCODE_TITLE_MODEL, opencodeEnv } from './acp-clis.ts';
import { geminiBin, RECORDING_SETTINGS, REPO_ROOT } from '../gemini/gemini-env.ts';

const OUT_DIR = join(REPO_ROOT, 'test', 'fixtures', 'acp');

async function record(
  name: string,
  command: string,
  args: string[],
  env: Record<string, string>,
  cwd: string,
  prompt: string,
): Promise<void> {
  const child = spawn(command, args, { cwd, env, stdio: ['pipe', 'pipe', 'ignore'] });
  const lines: string[] = [];
  let buffered = '';
  const tee = new Readable({ read() {} });
  child.stdout.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    tee.push(chunk);
  });
  child.stdout.on('end', () => tee.push(null));
  const connection = acp
    .client({ name: 'sessiond-recorder' })
    .onNotification('session/update', () => undefined)
    .onRequest('session/request_permission', ({ params }) => {
      const option = params.options.find((o) => o.kind === 'allow_once');
      return {
        outcome:
          option === undefined
            ? { outcome: 'cancelled' as const }
            : { outcome: 'selected' as const, optionId: option.optionId },
      };
    })
    .connect(
      acp.ndJsonStream(
        Writable.toWeb(child.stdin) as WritableStream<Uint8Array>,
        Readable.toWeb(tee) as ReadableStream<Uint8Array>,
      ),
    );
  const agent = connection.agent;
  try {
    await agent.request('initialize', {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: {
        fs: { readTextFile: false, writeTextFile: false },
        terminal: false,
        session: { notices: {} },
      },
    });
    const { sessionId } = await agent.request('session/new', { cwd, mcpServers: [] });
    await agent
      .request('session/prompt', { sessionId, prompt: [{ type: 'text', text: prompt }] })
      .catch(() => undefined);
  } finally {
    child.stdin.end();
    await new Promise((r) => child.once('exit', r));
    connection.close();
  }
  for (const line of buffered.split('\n')) if (line.trim() !== '') lines.push(withoutCommandList(line));
  writeFileSync(join(OUT_DIR, `${name}.stdout.jsonl`), `${lines.join('\n')}\n`);
  console.log(`${name}: ${lines.length} lines`);
}

/** An `available_commands_update` keeps its type but not its list and _meta (qwen's are 560 KB of slash commands and skills). */
function withoutCommandList(line: string): string {
  if (!line.includes('"available_commands_update"')) return line;
  const message = JSON.parse(line) as { params: { update: Record<string, unknown> } };
  message.params.update = { sessionUpdate: 'available_commands_update', availableCommands: [] };
  return JSON.stringify(message);
}

/** The agents named on the command line, or all. */
const only = new Set(process.argv.slice(2));
const wants = (agent: string) => only.size === 0 || only.has(agent);

mkdirSync(OUT_DIR, { recursive: true });
const root = mkdtempSync(join(tmpdir(), 'sessiond-acp-rec-'));
const gemini = await startFakeGeminiServer({ scripts: geminiBuiltinScripts() });
const openai = await startFakeModelServer({ scripts: { [OPENCODE_TITLE_MODEL]: { text: 'A title' } } });
const anthropic = await startFakeAnthropicServer();
openai.setScript('q-tool', ({ body }) =>
  (body.messages ?? []).some((m) => m.role === 'tool')
    ? { text: 'The command printed: hi' }
    : { toolCalls: [{ name: 'run_shell_command', arguments: { command: 'echo hi' } }] },
);
try {
  const cliHome = join(root, 'gemini-home');
  const work = join(root, 'work');
  const qwenHome = join(root, 'qwen-home');
  mkdirSync(join(cliHome, '.gemini'), { recursive: true });
  mkdirSync(join(qwenHome, '.qwen'), { recursive: true });
  mkdirSync(work);
  writeFileSync(join(cliHome, '.gemini', 'settings.json'), JSON.stringify(RECORDING_SETTINGS));
  const base = { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8' };
  const geminiEnv = {
    ...base,
    HOME: root,
    GEMINI_CLI_HOME: cliHome,
    GEMINI_CLI_NO_RELAUNCH: 'true',
    GEMINI_API_KEY: 'fake-gemini-key-not-secret',
    GOOGLE_GEMINI_BASE_URL: gemini.url,
  };
  for (const [scenario, model] of (wants('gemini')
    ? [
        ['text', 'fake-text'],
        ['thinking', 'fake-thinking'],
        ['tool', 'fake-tool-fail'],
        ['http401', 'fake-http401'],
        ['http500', 'fake-http500'],
      ]
    : []) as ReadonlyArray<readonly [string, string]>) {
    await record(
      `gemini-${scenario}`,
      geminiBin,
      ['--acp', '--model', model, '--skip-trust'],
      geminiEnv,
      work,
      'Say hello',
    );
  }
  const qwenBin = join(REPO_ROOT, 'agent-clis', 'node_modules', '.bin', 'qwen');
  const qwenEnv = {
    ...base,
    HOME: qwenHome,
    OPENAI_API_KEY: 'fake-openai-key-not-secret',
    OPENAI_BASE_URL: `${openai.url}/v1`,
  };
  for (const [scenario, model] of (wants('qwen')
    ? [
        ['text', 'text'],
        ['tool', 'q-tool'],
      ]
    : []) as ReadonlyArray<readonly [string, string]>) {
    await record(
      `qwen-${scenario}`,
      qwenBin,
      ['--acp', '--auth-type', 'openai', '--model', model],
      qwenEnv,
      work,
      'Say hello',
    );
  }
  const opencode = opencodeEnv(`${openai.url}/v1`, ['text', 'tool', 'http401']);
  for (const scenario of wants('opencode') ? ['text', 'tool', 'http401'] : []) {
    const agent = opencode.agent(scenario);
    await record(`opencode-${scenario}`, agent.command, agent.args, agent.env, opencode.cwd, 'Say hello');
  }
  opencode.cleanup();
  const claude = claudeAcpEnv(anthropic.url);
  for (const [scenario, model] of (wants('claude')
    ? [
        ['text', 'text'],
        ['tool', 'tool'],
        ['http500', 'http500'],
      ]
    : []) as ReadonlyArray<readonly [string, string]>) {
    const agent = claude.agent(model);
    await record(`claude-${scenario}`, agent.command, agent.args, agent.env, claude.cwd, 'Say hello');
  }
  claude.cleanup();
} finally {
  await gemini.close();
  await openai.close();
  await anthropic.close();
  rmSync(root, { recursive: true, force: true });
}
