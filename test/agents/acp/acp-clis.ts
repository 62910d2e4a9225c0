/**
 * What an operator would configure as `agents."acp:<name>"` for the suites on the real CLIs
 * (pinned in agent-clis/, installed by scripts/install-agent-clis.sh):
 * - Gemini CLI 0.61.0 (`gemini --acp`) against the fake Gemini API, its own retries off in the
 *   settings of its GEMINI_CLI_HOME (general.maxAttempts 1).
 * - Qwen Code 0.24.4 (`qwen --acp`) against the fake OpenAI-compatible API, its key and base URL
 *   in the env, its HOME with ~/.qwen/settings.json (generationConfig.maxRetries 0, which does not
 *   stop its retries on a 500: see acp-clis-runtime.test.ts); its memory extractor, one more
 *   request to the model after each turn, off (memory.enableManagedAutoMemory false).
 * - OpenCode 1.18.33 (`opencode acp`) against the fake OpenAI-compatible API: one provider `fake`
 *   (`@ai-sdk/openai-compatible`, bundled in opencode) in `OPENCODE_CONFIG_CONTENT`, its models
 *   the fake server's scripts; the title request goes to a model of its own (`small_model`), so
 *   the scripted model sees exactly the turn's requests. Its shell tool asks (`permission.bash:
 *   "ask"`), so sessiond's permissionMode decides. Nothing leaves 127.0.0.1: no models.dev fetch,
 *   no autoupdate, no LSP download, and its background install of `@opencode-ai/plugin` into the
 *   config dir is kept offline (`npm_config_offline`), where it fails quietly.
 * - The Claude Code ACP adapter 0.101.0 (`claude-agent-acp`, on the Claude Agent SDK and its
 *   bundled Claude Code binary) against the fake Anthropic API, with Claude Code's own retries off
 *   (`CLAUDE_CODE_MAX_RETRIES=0`) and `permissions.defaultMode: "default"` in the settings of its
 *   `CLAUDE_CONFIG_DIR` (without it the adapter starts in `auto`, where a command runs unasked).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AcpOptionsInput } from '../../../src/agents/acp/options.ts';
import { runAcp } from '../../../src/agents/acp/provider.ts';
import type { RunContext } from '../../../src/agents/shared/run-attempt.ts';
import type { CliMessage } from '../../../src/protocol/index.ts';
import { deploymentPolicy } from '../../../src/runtime/deployment-policy.ts';
import type { Runtime } from '../../../src/runtime/runtime.ts';
import { deploymentWith } from '../../support/approvals.ts';
import type { Harness } from '../../support/runtime.ts';
import { createGeminiEnv, geminiBin, RECORDING_SETTINGS, REPO_ROOT } from '../gemini/gemini-env.ts';

export const opencodeBin = join(REPO_ROOT, 'agent-clis', 'node_modules', '.bin', 'opencode');
export const claudeAcpBin = join(REPO_ROOT, 'agent-clis', 'node_modules', '.bin', 'claude-agent-acp');
export const qwenBin = join(REPO_ROOT, 'agent-clis', 'node_modules', '.bin', 'qwen');

/** The model OpenCode asks for the session's title (a script of its own on the fake server). */
export const OPENCODE_TITLE_MODEL = 'oc-title';

export interface AcpCliEnv {
  root: string;
  cwd: string;
  /** The operator's entry for this agent, with `model` as the model it asks for. */
  agent(model: string): { command: string; args: string[]; env: Record<string, string> };
  cleanup(): void;
}

const PATH = process.env.PATH ?? '/usr/bin:/bin';

export function opencodeEnv(baseUrl: string, models: readonly string[]): AcpCliEnv {
  const root = mkdtempSync(join(tmpdir(), 'sessiond-opencode-'));
  const home = join(root, 'home');
  const cwd = join(root, 'work');
  mkdirSync(home, { recursive: true });
  mkdirSync(cwd);
  return {
    root,
    cwd,
    agent: (model) => ({
      command: opencodeBin,
      args: ['acp'],
      env: {
        PATH,
        HOME: home,
        OPENCODE_CONFIG_CONTENT: JSON.stringify({
          autoupdate: false,
          share: 'disabled',
          permission: { bash: 'ask', edit: 'ask' },
          provider: {
            fake: {
              npm: '@ai-sdk/openai-compatible',
              name: 'Fake',
              options: { baseURL: baseUrl, apiKey: 'fake-openai-key-not-secret' },
              models: Object.fromEntries([...models, OPENCODE_TITLE_MODEL].map((m) => [m, { name: m }])),
            },
          },
          model: `fake/${model}`,
          small_model: `fake/${OPENCODE_TITLE_MODEL}`,
        }),
        OPENCODE_DISABLE_MODELS_FETCH: '1',
        OPENCODE_DISABLE_AUTOUPDATE: '1',
        OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
        OPENCODE_DISABLE_DEFAULT_PLUGINS: '1',
        OPENCODE_DISABLE_SHARE: '1',
        npm_config_offline: 'true',
      },
    }),
    cleanup: () => rmSync(root, { recursive: true, force: true }),
  };
}

export function geminiAcpEnv(serverUrl: string): AcpCliEnv {
  const gemini = createGeminiEnv({ serverUrl });
  const cliHome = join(gemini.root, 'cli-home');
  mkdirSync(join(cliHome, '.gemini'), { recursive: true });
  writeFileSync(join(cliHome, '.gemini', 'settings.json'), JSON.stringify(RECORDING_SETTINGS));
  const { SESSIOND_STATE_DIR: _state, ...env } = gemini.env;
  return {
    root: gemini.root,
    cwd: gemini.cwd,
    agent: (model) => ({
      command: geminiBin,
      args: ['--acp', '--model', model, '--skip-trust'],
      env: { ...env, GEMINI_CLI_HOME: cliHome, GEMINI_CLI_NO_RELAUNCH: 'true' },
    }),
    cleanup: () => gemini.cleanup(),
  };
}

export function qwenEnv(baseUrl: string): AcpCliEnv {
  const root = mkdtempSync(join(tmpdir(), 'sessiond-qwen-'));
  const home = join(root, 'home');
  const cwd = join(root, 'work');
  mkdirSync(join(home, '.qwen'), { recursive: true });
  mkdirSync(cwd);
  writeFileSync(
    join(home, '.qwen', 'settings.json'),
    JSON.stringify({ model: { generationConfig: { maxRetries: 0 } }, memory: { enableManagedAutoMemory: false } }),
  );
  return {
    root,
    cwd,
    agent: (model) => ({
      command: qwenBin,
      args: ['--acp', '--auth-type', 'openai', '--model', model],
      env: { PATH, HOME: home, OPENAI_API_KEY: 'fake-openai-key-not-secret', OPENAI_BASE_URL: baseUrl },
    }),
    cleanup: () => rmSync(root, { recursive: true, force: true }),
  };
}

export function claudeAcpEnv(baseUrl: string): AcpCliEnv {
  const root = mkdtempSync(join(tmpdir(), 'sessiond-claude-acp-'));
  const home = join(root, 'home');
  const config = join(root, 'config');
  const cwd = join(root, 'work');
  for (const dir of [home, config, cwd]) mkdirSync(dir, { recursive: true });
  writeFileSync(join(config, 'settings.json'), JSON.stringify({ permissions: { defaultMode: 'default' } }));
  return {
    root,
    cwd,
    agent: (model) => ({
      command: claudeAcpBin,
      args: [],
      env: {
        PATH,
        HOME: home,
        CLAUDE_CONFIG_DIR: config,
        ANTHROPIC_BASE_URL: baseUrl,
        ANTHROPIC_API_KEY: 'sk-ant-fake-not-secret',
        ANTHROPIC_MODEL: model,
        CLAUDE_CODE_MAX_RETRIES: '0',
        CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK: '1',
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
        DISABLE_AUTOUPDATER: '1',
        DISABLE_TELEMETRY: '1',
        DISABLE_ERROR_REPORTING: '1',
      },
    }),
    cleanup: () => rmSync(root, { recursive: true, force: true }),
  };
}

/** One attempt of the agent as configured, collected. */
export async function attemptOf(
  env: AcpCliEnv,
  model: string,
  extra: Partial<AcpOptionsInput> = {},
  context: RunContext = {},
): Promise<CliMessage[]> {
  const out: CliMessage[] = [];
  for await (const message of runAcp(attemptOptions(env, model, extra), context)) out.push(message);
  return out;
}

export function attemptOptions(env: AcpCliEnv, model: string, extra: Partial<AcpOptionsInput> = {}): AcpOptionsInput {
  return { ...env.agent(model), prompt: 'Say hello', cwd: env.cwd, idleTimeoutMs: 60_000, ...extra };
}

export const textOf = (messages: CliMessage[], type: 'assistant' | 'assistant.thought' = 'assistant') =>
  messages.map((m) => (m.type === type ? m.content.text : '')).join('');

export async function waitFor(check: () => boolean, what: string, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * A runtime and a worker of their own (own prefix, same Redis) whose policy denies a permission
 * request nobody answered within `deadlineMs`: for the deadline case of an approval flow.
 */
export function shortDeadline(
  h: Harness,
  operator: Record<string, Record<string, unknown>>,
  policy: Record<string, unknown>,
  deadlineMs = 1000,
): Promise<{ runtime: Runtime; close(): Promise<void> }> {
  return deploymentWith(
    h,
    deploymentPolicy({ workspace: tmpdir(), agents: operator, policy: { ...policy, approvals: { deadlineMs } } }),
    operator,
  );
}
