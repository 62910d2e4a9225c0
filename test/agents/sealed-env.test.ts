/**
 * The sealed agent environment, pinned with each real agent CLI (pi, Claude Code, Codex, Gemini)
 * against its fake model API on 127.0.0.1: the model asks for one shell tool call that runs `env`,
 * and the recorded tool result (the `tool.completed` message) is what the agent's tools can see.
 *
 * The worker's environment is planted with secrets before each attempt: other agents' keys,
 * SESSIOND_AGENT_OPTIONS holding every agent's key (as the README suggests configuring them),
 * SESSIOND_API_TOKEN, a cloud credential and a plain worker variable. The host options come from
 * that environment the way the worker builds them (agentHostOptions(loadConfig())), and each
 * attempt runs through the agent definition's `run` with attemptOptions, as the worker does.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AGENT_NAMES, AGENTS, type AgentName } from '../../src/agents/registry.ts';
import { agentHostOptions, loadConfig } from '../../src/config/config.ts';
import { isBaseEnvName } from '../../src/process/index.ts';
import type { CliMessage } from '../../src/index.ts';
import { attemptOptions } from '../../src/runtime/deployment-policy.ts';
import { claudeBin, createClaudeEnv, type ClaudeEnv } from '../support/claude-code-env.ts';
import { hasToolResult, startFakeAnthropicServer, type FakeAnthropicServer } from '../support/fake-anthropic-server.ts';
import { hasFunctionResponse, startFakeGeminiServer, type FakeGeminiServer } from '../support/fake-gemini-server.ts';
import {
  hasToolResult as hasChatToolResult,
  startFakeModelServer,
  type FakeModelServer,
} from '../support/fake-model-server.ts';
import {
  hasFunctionCallOutput,
  startFakeResponsesServer,
  type FakeResponsesServer,
} from '../support/fake-responses-server.ts';
import { createPiEnv, piBin, NO_DISCOVERY, type PiEnv } from '../support/pi-env.ts';
import { codexBin, createCodexEnv, FAKE_KEY_ENV, FAKE_MODEL, type CodexEnv } from './codex/codex-env.ts';
import { createGeminiEnv, geminiBin, type GeminiEnv } from './gemini/gemini-env.ts';
import { terminalOf } from './contract.ts';

/** Each agent's own key, as the operator configures it for that agent only (its options `env`). */
const OWN_KEYS: Record<AgentName, { name: string; value: string }> = {
  pi: { name: 'OPENAI_API_KEY', value: 'sk-own-pi-0001' },
  'claude-code': { name: 'ANTHROPIC_API_KEY', value: 'sk-own-claude-code-0002' },
  codex: { name: FAKE_KEY_ENV, value: 'sk-own-codex-0003' },
  gemini: { name: 'GEMINI_API_KEY', value: 'sk-own-gemini-0004' },
};

/** Secrets in the worker's own environment that no agent may see (besides SESSIOND_AGENT_OPTIONS and SESSIOND_CONFIG, see workerEnv). */
const PLANTED: Record<string, string> = {
  ANTHROPIC_API_KEY: 'sk-planted-anthropic',
  OPENAI_API_KEY: 'sk-planted-openai',
  GEMINI_API_KEY: 'sk-planted-gemini',
  AWS_SECRET_ACCESS_KEY: 'planted-aws-secret',
  SESSIOND_API_TOKEN: 'planted-token-0123456789',
  // A name no CLI filters on its own (no KEY/SECRET/TOKEN in it): only the seal keeps it out.
  WORKER_ONLY_SETTING: 'planted-worker-only-setting',
};

/** Variables a shell sets for itself (their worker values may equal the tool's by chance). */
const SHELL_SET = new Set(['PWD', 'OLDPWD', 'SHLVL', '_']);
/** Shorter worker values (`PAGER=cat`, `CI=true`) may be what a CLI sets on its own: not counted as a leak. */
const DISTINCTIVE = 8;

const SHELL_COMMAND = 'env';

let piServer: FakeModelServer;
let anthropic: FakeAnthropicServer;
let responses: FakeResponsesServer;
let geminiServer: FakeGeminiServer;
let piEnv: PiEnv;
let claudeEnv: ClaudeEnv;
let codexEnv: CodexEnv;
let geminiEnv: GeminiEnv;
let stateDir: string;
let configFile: string;

beforeAll(async () => {
  // Not skipped when missing: CI installs the pinned CLIs (scripts/install-agent-clis.sh).
  for (const bin of [claudeBin, codexBin, geminiBin])
    if (!existsSync(bin)) throw new Error(`${bin} not found: run scripts/install-agent-clis.sh (npm test does)`);
  piServer = await startFakeModelServer();
  piServer.setScript('env-tool', ({ body }) =>
    hasChatToolResult(body)
      ? { text: 'Printed the environment.' }
      : { toolCalls: [{ name: 'bash', arguments: { command: SHELL_COMMAND } }] },
  );
  anthropic = await startFakeAnthropicServer();
  anthropic.setScript('env-tool', ({ body }) =>
    hasToolResult(body)
      ? { text: 'Printed the environment.' }
      : { toolUses: [{ name: 'Bash', input: { command: SHELL_COMMAND, description: 'Print the environment' } }] },
  );
  responses = await startFakeResponsesServer();
  responses.setScript('env-tool', ({ body }) =>
    hasFunctionCallOutput(body)
      ? { text: 'Printed the environment.' }
      : { functionCalls: [{ name: 'exec_command', arguments: { cmd: SHELL_COMMAND } }] },
  );
  geminiServer = await startFakeGeminiServer();
  geminiServer.setScript('fake-env-tool', ({ body }) =>
    hasFunctionResponse(body)
      ? { text: 'Printed the environment.' }
      : {
          functionCalls: [
            { name: 'run_shell_command', args: { command: SHELL_COMMAND, description: 'Print the environment' } },
          ],
        },
  );
  piEnv = createPiEnv({ serverUrl: piServer.url, extraModels: ['env-tool'] });
  claudeEnv = createClaudeEnv(anthropic.url);
  codexEnv = createCodexEnv();
  geminiEnv = createGeminiEnv({ serverUrl: geminiServer.url });
  stateDir = mkdtempSync(join(tmpdir(), 'sessiond-sealed-env-'));
  configFile = join(stateDir, 'sessiond.json');
  writeFileSync(configFile, `${JSON.stringify({ prefix: 'sealed-env' })}\n`);
});

afterAll(async () => {
  await Promise.all([piServer?.close(), anthropic?.close(), responses?.close(), geminiServer?.close()]);
  for (const env of [piEnv, claudeEnv, codexEnv, geminiEnv]) env?.cleanup();
  if (stateDir !== undefined) rmSync(stateDir, { recursive: true, force: true });
});

/**
 * What the operator configures for each agent (SESSIOND_AGENT_OPTIONS): its command, its dirs, the
 * fake API it talks to, its own key, and (Claude Code, Gemini) the permission that lets its shell
 * tool run headless, pinned by the host. The env of the test helpers holds only PATH, HOME, LANG…
 */
function operatorAgentOptions(): Record<AgentName, Record<string, unknown>> {
  const own = (agent: AgentName): Record<string, string> => ({ [OWN_KEYS[agent].name]: OWN_KEYS[agent].value });
  const { SESSIOND_STATE_DIR: _codexState, [FAKE_KEY_ENV]: _codexKey, ...codexBase } = codexEnv.env;
  const { SESSIOND_STATE_DIR: _geminiState, GEMINI_API_KEY: _geminiKey, ...geminiBase } = geminiEnv.env;
  const { ANTHROPIC_API_KEY: _claudeKey, ...claudeBase } = claudeEnv.options.env ?? {};
  return {
    pi: {
      command: piBin,
      agentDir: piEnv.agentDir,
      sessionDir: piEnv.sessionDir,
      extraArgs: NO_DISCOVERY,
      env: { ...piEnv.env, ...own('pi') },
    },
    'claude-code': {
      command: claudeBin,
      configDir: claudeEnv.configDir,
      tmpDir: claudeEnv.tmpDir,
      allowedTools: ['Bash'],
      env: { ...claudeBase, ...own('claude-code') },
    },
    codex: {
      command: codexBin,
      codexHome: codexEnv.userCodexHome,
      baseUrl: responses.urlFor('env-tool'),
      envKey: FAKE_KEY_ENV,
      env: { ...codexBase, ...own('codex') },
    },
    gemini: {
      command: geminiBin,
      configDir: geminiEnv.configDir,
      approvalMode: 'yolo',
      env: { ...geminiBase, ...own('gemini') },
    },
  };
}

/** The worker's environment of a test: the planted secrets, the operator's agent options and config file. */
function workerEnv(operator: Record<AgentName, Record<string, unknown>>): Record<string, string> {
  return { ...PLANTED, SESSIOND_AGENT_OPTIONS: JSON.stringify(operator), SESSIOND_CONFIG: configFile };
}

/** What a caller chooses for the turn (within any deployment policy's defaults). */
function callerOptions(agent: AgentName): Record<string, unknown> {
  switch (agent) {
    case 'pi':
      return { provider: 'fake', model: 'env-tool', cwd: piEnv.cwd };
    case 'claude-code':
      return { model: 'env-tool', cwd: claudeEnv.cwd };
    case 'codex':
      return { model: FAKE_MODEL, cwd: codexEnv.cwd };
    case 'gemini':
      return { model: 'fake-env-tool', cwd: geminiEnv.cwd };
  }
}

let saved: Record<string, string | undefined> = {};

/** Sets `vars` on the worker's process.env until the test ends. */
function plant(vars: Record<string, string>): void {
  for (const [name, value] of Object.entries(vars)) {
    if (!(name in saved)) saved[name] = process.env[name];
    process.env[name] = value;
  }
}

beforeEach(() => {
  saved = {};
});

afterEach(() => {
  for (const [name, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

/** One attempt of `agent` as the worker runs it: host options from the worker's config and env, the caller's under them. */
async function workerAttempt(
  agent: AgentName,
  context: { traceparent?: string } = {},
): Promise<{ messages: CliMessage[]; marker: string }> {
  const host = agentHostOptions(loadConfig({ stateDir }, process.env), AGENT_NAMES, process.env);
  const options = attemptOptions(host[agent] ?? {}, callerOptions(agent));
  const messages: CliMessage[] = [];
  let marker = '';
  for await (const message of AGENTS[agent].run(
    { text: 'Print your environment with env.', resumeSessionId: null, options },
    { ...context, onSpawn: (spawned) => (marker = spawned.marker) },
  ))
    messages.push(message);
  return { messages, marker };
}

/** Every string in a value, depth first. */
function strings(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.flatMap(strings);
  if (value !== null && typeof value === 'object') return Object.values(value).flatMap(strings);
  return [];
}

/** The text of the one tool.completed message's result: what `env` printed, as recorded. */
function envOutput(messages: CliMessage[]): string {
  const done = messages.filter((m) => m.type === 'tool.completed');
  expect(
    done,
    JSON.stringify(messages.filter((m) => m.type.startsWith('tool') || m.type.startsWith('terminal'))),
  ).toHaveLength(1);
  return strings((done[0]!.content as { result?: unknown }).result).join('\n');
}

/** `NAME` → value for each `NAME=value` line of env's output. */
function envVars(output: string): Map<string, string> {
  const vars = new Map<string, string>();
  for (const line of output.split('\n')) {
    const match = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
    if (match) vars.set(match[1]!, match[2]!);
  }
  return vars;
}

describe('the sealed agent environment, seen by a shell tool of each real agent CLI', () => {
  it.each(AGENT_NAMES.map((agent) => [agent]))(
    "%s: a shell tool's `env` shows the agent's own key and the tree marker, and no other agent's key, no secret of the worker, no other SESSIOND_ variable",
    async (agent) => {
      const operator = operatorAgentOptions();
      plant(workerEnv(operator));
      const { messages, marker } = await workerAttempt(agent);
      expect(terminalOf(messages).type).toBe('terminal.completed');
      const output = envOutput(messages);
      const vars = envVars(output);

      // It is env's output, and the tools of the attempt carry the marker (how sessiond finds them).
      expect(vars.get('SESSIOND_AGENT_MARKER')).toBe(marker);
      expect(vars.get('HOME')).toBe((operator[agent].env as Record<string, string>).HOME);
      expect([...vars.keys()].filter((name) => name.startsWith('SESSIOND_'))).toEqual(['SESSIOND_AGENT_MARKER']);

      for (const [name, value] of Object.entries(PLANTED)) expect(output, `${name} of the worker`).not.toContain(value);
      expect(output).not.toContain('SESSIOND_AGENT_OPTIONS');
      expect(output).not.toContain(configFile);
      for (const other of AGENT_NAMES.filter((a) => a !== agent))
        expect(output, `the key of ${other}`).not.toContain(OWN_KEYS[other].value);
      expect(vars.get(OWN_KEYS[agent].name)).toBe(OWN_KEYS[agent].value);

      // Nothing else of the worker's environment: no variable outside the base and the agent's own options.
      const configured = new Set(Object.keys((operator[agent].env ?? {}) as Record<string, string>));
      const leaked = Object.entries(process.env).filter(
        ([name, value]) =>
          value !== undefined &&
          value.length >= DISTINCTIVE &&
          !isBaseEnvName(name) &&
          !configured.has(name) &&
          !SHELL_SET.has(name) &&
          vars.get(name) === value,
      );
      expect(leaked.map(([name]) => name)).toEqual([]);
    },
  );

  it("a variable the operator names in the config's agentEnv reaches the agent's tools by name; unnamed ones and SESSIOND_ ones do not", async () => {
    plant({
      ...workerEnv(operatorAgentOptions()),
      // The operator's list names one variable of the worker, and (in vain) one of sessiond's own.
      SESSIOND_AGENT_ENV: 'OPERATOR_NAMED_VAR, SESSIOND_API_TOKEN',
      OPERATOR_NAMED_VAR: 'named-by-the-operator',
      OPERATOR_UNNAMED_VAR: 'not-named-by-the-operator',
    });
    expect(loadConfig({ stateDir }).agentEnv).toEqual(['OPERATOR_NAMED_VAR', 'SESSIOND_API_TOKEN']);
    const { messages } = await workerAttempt('pi');
    expect(terminalOf(messages).type).toBe('terminal.completed');
    const output = envOutput(messages);
    const vars = envVars(output);
    expect(vars.get('OPERATOR_NAMED_VAR')).toBe('named-by-the-operator');
    expect(output).not.toContain('not-named-by-the-operator');
    expect(output).not.toContain(PLANTED.SESSIOND_API_TOKEN);
    expect([...vars.keys()].filter((name) => name.startsWith('SESSIOND_'))).toEqual(['SESSIOND_AGENT_MARKER']);
  });

  it("the attempt's TRACEPARENT reaches the agent's tools, added on purpose; the worker's own trace context does not", async () => {
    plant({
      ...workerEnv(operatorAgentOptions()),
      TRACEPARENT: '00-11111111111111111111111111111111-2222222222222222-01',
      TRACESTATE: 'worker=own-trace-state',
    });
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const { messages } = await workerAttempt('pi', { traceparent });
    expect(terminalOf(messages).type).toBe('terminal.completed');
    const vars = envVars(envOutput(messages));
    expect(vars.get('TRACEPARENT')).toBe(traceparent);
    expect(vars.has('TRACESTATE')).toBe(false);
  });
});
