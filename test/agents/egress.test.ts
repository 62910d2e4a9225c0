/**
 * Egress and credential brokering with the real agent CLIs (pi, Claude Code, Codex, Gemini) against
 * their fake model APIs on loopback: each attempt runs with RunContext.egress (as the worker sets
 * it), its tool runs a probe script that reaches an allowed host and a denied one through the
 * proxy and copies what the attempt's processes hold (environ, cmdline of every process with the
 * attempt's marker). The fake model must see the real key; nothing of the attempt may hold it.
 *
 * In each sandbox mode: bwrap (a network namespace with only `lo`: the proxy is the only way out),
 * landlock (TCP connect limited to the bridges' ports) and none (the same proxy through loopback
 * ports of the worker, which a tool could bypass; see docs/network.md).
 */
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runClaudeCode } from '../../src/agents/claude-code/provider.ts';
import { runCodex } from '../../src/agents/codex/provider.ts';
import { runGemini } from '../../src/agents/gemini/provider.ts';
import { runPi } from '../../src/agents/pi/provider.ts';
import type { RunContext } from '../../src/agents/shared/run-attempt.ts';
import type { AttemptRefusal } from '../../src/process/egress/index.ts';
import type { SandboxMode } from '../../src/process/index.ts';
import { startFakeAnthropicServer, hasToolResult, type FakeAnthropicServer } from '../support/fake-anthropic-server.ts';
import { startFakeGeminiServer, hasFunctionResponse, type FakeGeminiServer } from '../support/fake-gemini-server.ts';
import { startFakeModelServer, type FakeModelServer } from '../support/fake-model-server.ts';
import {
  startFakeResponsesServer,
  hasFunctionCallOutput,
  type FakeResponsesServer,
} from '../support/fake-responses-server.ts';
import { claudeBin } from '../support/claude-code-env.ts';
import { collect } from '../support/processes.ts';
import { hostPattern as pattern } from '../support/egress.ts';
import { NO_DISCOVERY, piBin } from '../support/pi-env.ts';
import { codexBin, FAKE_MODEL } from './codex/codex-env.ts';
import { geminiBin } from './gemini/gemini-env.ts';
import { terminalOf } from './contract.ts';

/** The provider keys: each must reach its fake model and nothing else. */
const KEYS = {
  pi: 'sk-pi-REAL-0123456789',
  claude: 'sk-ant-REAL-0123456789',
  codex: 'sk-openai-REAL-0123456789',
  gemini: 'AIza-REAL-0123456789',
};

let root: string;
let allowed: { server: Server; port: number; hits: string[] };
let denied: { server: Server; port: number; hits: string[] };

async function hostServer(address: string): Promise<{ server: Server; port: number; hits: string[] }> {
  const hits: string[] = [];
  const server = createServer((req, res) => {
    hits.push(`${req.method ?? ''} ${req.url ?? ''} ${JSON.stringify(req.headers)}`);
    res.end('allowed-host-answer');
  });
  await new Promise<void>((r) => server.listen(0, address, r));
  return { server, port: (server.address() as AddressInfo).port, hits };
}

/** The tool's command: the same probe for every agent, copied into its cwd (a sandbox shows it that, not the test's files). */
function probeCommand(cwd: string): string {
  return `sh ${join(cwd, 'probe.sh')} ${join(cwd, 'out')}`;
}

let probe = '';

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'sessiond-egress-agents-'));
  [allowed, denied] = await Promise.all([hostServer('127.0.0.2'), hostServer('127.0.0.3')]);
  // Runs as the agent's tool: what an injected command would try.
  probe = [
    'out="$1"; mkdir -p "$out"',
    `curl -sS --max-time 10 http://127.0.0.2:${allowed.port}/ok > "$out/allowed" 2>&1`,
    `curl -sS --max-time 10 -o /dev/null -w '%{http_code}' http://127.0.0.3:${denied.port}/x > "$out/denied-http" 2>&1`,
    `curl -sS --max-time 10 -o /dev/null -w '%{http_code}' https://127.0.0.3:${denied.port}/x > "$out/denied-https" 2>&1`,
    'env > "$out/tool-env"',
    ': > "$out/procs"',
    // every process of this attempt (its marker): environ and argv
    'for p in /proc/[0-9]*; do',
    '  if tr "\\0" "\\n" < $p/environ 2>/dev/null | grep -qx "SESSIOND_AGENT_MARKER=$SESSIOND_AGENT_MARKER"; then',
    '    { cat $p/environ; echo; cat $p/cmdline; echo; } >> "$out/procs" 2>/dev/null',
    '  fi',
    'done',
    'echo probed',
  ].join('\n');
});

afterAll(() => {
  allowed?.server.close();
  denied?.server.close();
  if (root !== undefined) rmSync(root, { recursive: true, force: true });
});

/** The sandbox each spawned attempt ran in (onSpawn). */
const ranIn = new Map<string, SandboxMode>();

function egressContext(mode: SandboxMode, sessionId: string, refusals: AttemptRefusal[]): RunContext {
  return {
    sandbox: { mode },
    onSpawn: (agent) => ranIn.set(sessionId, agent.sandbox),
    egress: {
      sessionId,
      turn: 1,
      attempt: 1,
      allow: [pattern(`127.0.0.2:${allowed.port}`)],
      onRefused: (r) => refusals.push(r),
    },
  };
}

/** Every file under `dir` (symlinks not followed), as text. */
function filesUnder(dir: string): Array<{ path: string; text: string }> {
  const out: Array<{ path: string; text: string }> = [];
  const walk = (d: string): void => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const path = join(d, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile() && statSync(path).size < 10_000_000)
        out.push({ path, text: readFileSync(path, 'latin1') });
    }
  };
  walk(dir);
  return out;
}

/** What every agent must show: the tool's network as the policy says, no key anywhere in the attempt. */
function expectContained(key: string, sessionId: string, refusals: AttemptRefusal[], agentRoot: string): void {
  expect(ranIn.get(sessionId)).toBe(sessionId.slice(sessionId.lastIndexOf('-') + 1));
  const out = join(agentRoot, 'work', 'out');
  expect(readFileSync(join(out, 'allowed'), 'utf8')).toBe('allowed-host-answer');
  expect(readFileSync(join(out, 'denied-http'), 'utf8')).toBe('403');
  expect(readFileSync(join(out, 'denied-https'), 'utf8')).not.toBe('200');
  expect(refusals).toEqual(
    expect.arrayContaining([
      expect.objectContaining({
        host: '127.0.0.3',
        port: denied.port,
        method: 'GET',
        reason: 'not allowed',
        sessionId,
      }),
      expect.objectContaining({
        host: '127.0.0.3',
        port: denied.port,
        method: 'CONNECT',
        reason: 'not allowed',
        sessionId,
      }),
    ]),
  );
  const toolEnv = readFileSync(join(out, 'tool-env'), 'utf8');
  expect(toolEnv).toMatch(/^HTTPS_PROXY=http:\/\/127\.0\.0\.1:\d+$/m);
  const procs = readFileSync(join(out, 'procs'), 'latin1');
  // the agent's own process is among them (not only the probe's shell); under landlock no other
  // process's environ is readable from inside (docs/sandbox.md): the tool's own env stands for it
  if (!sessionId.endsWith('landlock'))
    expect(procs.split('\n').filter((l) => l.includes('SESSIOND_AGENT_MARKER=')).length).toBeGreaterThanOrEqual(2);
  expect(procs).not.toContain(key);
  expect(toolEnv).not.toContain(key);
  // nor in any file of the agent's dirs (its home, config, state dir, cwd, sessions)
  const holding = filesUnder(agentRoot).filter((f) => f.text.includes(key) && !f.path.startsWith(out));
  expect(holding.map((f) => f.path)).toEqual([]);
  expect(denied.hits).toEqual([]);
}

function agentRoot(name: string): string {
  const dir = join(root, 'agents', name);
  for (const sub of ['home', 'state', 'work', 'tmp', 'config']) mkdirSync(join(dir, sub), { recursive: true });
  writeFileSync(join(dir, 'work', 'probe.sh'), probe);
  chmodSync(join(dir, 'work', 'probe.sh'), 0o755);
  return dir;
}

describe.each(['bwrap', 'landlock', 'none'] as const)(
  'egress by policy, credentials brokered, with the real agent CLIs (sandbox %s)',
  (mode) => {
    let pi: FakeModelServer;
    let anthropic: FakeAnthropicServer;
    let responses: FakeResponsesServer;
    let gemini: FakeGeminiServer;
    beforeAll(async () => {
      [pi, anthropic, responses, gemini] = await Promise.all([
        startFakeModelServer(),
        startFakeAnthropicServer(),
        startFakeResponsesServer(),
        startFakeGeminiServer(),
      ]);
    });
    afterAll(async () => {
      await Promise.all([pi?.close(), anthropic?.close(), responses?.close(), gemini?.close()]);
    });

    it('pi: models.json key brokered (an env var name in the user models.json), tool egress as the policy says', async () => {
      const dir = agentRoot(`pi-${mode}`);
      const agentDir = join(dir, 'home', '.pi', 'agent');
      mkdirSync(agentDir, { recursive: true });
      // The user's models.json names the variable that holds the key, as pi allows.
      writeFileSync(
        join(agentDir, 'models.json'),
        JSON.stringify({
          providers: {
            fake: {
              baseUrl: `${pi.url}`,
              api: 'openai-completions',
              apiKey: 'PI_FAKE_KEY',
              compat: { supportsDeveloperRole: false },
              models: [{ id: `egress-tool-${mode}` }],
            },
          },
        }),
      );
      pi.setScript(`egress-tool-${mode}`, ({ body }) =>
        (body.messages ?? []).some((m) => m.role === 'tool')
          ? { text: 'done' }
          : { toolCalls: [{ name: 'bash', arguments: { command: probeCommand(join(dir, 'work')) } }] },
      );
      const refusals: AttemptRefusal[] = [];
      const messages = await collect(
        runPi(
          {
            prompt: 'probe',
            provider: 'fake',
            model: `egress-tool-${mode}`,
            cwd: join(dir, 'work'),
            agentDir,
            sessionDir: join(dir, 'state', 'sessions'),
            command: piBin,
            extraArgs: NO_DISCOVERY,
            env: { HOME: join(dir, 'home'), SESSIOND_STATE_DIR: join(dir, 'state'), PI_FAKE_KEY: KEYS.pi },
          },
          egressContext(mode, `sess-pi-${mode}`, refusals),
        ),
      );
      expect(terminalOf(messages)).toMatchObject({ type: 'terminal.completed' });
      const requests = pi.requestsFor(`egress-tool-${mode}`);
      expect(requests.length).toBe(2);
      for (const r of requests) expect(r.headers.authorization).toBe(`Bearer ${KEYS.pi}`);
      // the user's models.json holds no key, only a variable name: nothing on disk may hold it
      expectContained(KEYS.pi, `sess-pi-${mode}`, refusals, dir);
      // the attempt's agent dir is gone with the attempt
      expect(readdirSync(join(dir, 'state', 'pi-attempts'))).toEqual([]);
    }, 60_000);

    it('Claude Code: ANTHROPIC_BASE_URL to the bridge, placeholder ANTHROPIC_API_KEY; the fake API gets the real x-api-key', async () => {
      const dir = agentRoot(`claude-${mode}`);
      anthropic.setScript(`egress-tool-${mode}`, ({ body }) =>
        hasToolResult(body)
          ? { text: 'done' }
          : { toolUses: [{ name: 'Bash', input: { command: probeCommand(join(dir, 'work')) } }] },
      );
      const refusals: AttemptRefusal[] = [];
      const messages = await collect(
        runClaudeCode(
          {
            prompt: 'probe',
            model: `egress-tool-${mode}`,
            cwd: join(dir, 'work'),
            configDir: join(dir, 'config'),
            tmpDir: join(dir, 'tmp'),
            command: claudeBin,
            allowedTools: ['Bash'],
            env: { HOME: join(dir, 'home'), ANTHROPIC_BASE_URL: anthropic.url, ANTHROPIC_API_KEY: KEYS.claude },
          },
          egressContext(mode, `sess-claude-${mode}`, refusals),
        ),
      );
      expect(terminalOf(messages)).toMatchObject({ type: 'terminal.completed' });
      const requests = anthropic.requestsFor(`egress-tool-${mode}`);
      expect(requests.length).toBeGreaterThanOrEqual(2);
      for (const r of requests) expect(r.headers['x-api-key']).toBe(KEYS.claude);
      expectContained(KEYS.claude, `sess-claude-${mode}`, refusals, dir);
    }, 90_000);

    it('Codex: its sessiond provider (baseUrl + envKey) points at the bridge, the envKey variable holds the placeholder', async () => {
      const dir = agentRoot(`codex-${mode}`);
      mkdirSync(join(dir, 'home', '.codex'), { recursive: true });
      writeFileSync(join(dir, 'home', '.codex', 'config.toml'), `model = "${FAKE_MODEL}"\n`);
      responses.setScript(`egress-tool-${mode}`, ({ body }) =>
        hasFunctionCallOutput(body)
          ? { text: 'done' }
          : { functionCalls: [{ name: 'exec_command', arguments: { cmd: probeCommand(join(dir, 'work')) } }] },
      );
      const refusals: AttemptRefusal[] = [];
      const messages = await collect(
        runCodex(
          {
            prompt: 'probe',
            cwd: join(dir, 'work'),
            model: FAKE_MODEL,
            baseUrl: responses.urlFor(`egress-tool-${mode}`),
            envKey: 'OPENAI_FAKE_KEY',
            // Codex's own sandbox cuts its tools off the network: the proxy is what decides here.
            sandbox: 'danger-full-access',
            command: codexBin,
            codexHome: join(dir, 'home', '.codex'),
            env: {
              HOME: join(dir, 'home'),
              TMPDIR: join(dir, 'tmp'),
              SESSIOND_STATE_DIR: join(dir, 'state'),
              OPENAI_FAKE_KEY: KEYS.codex,
            },
          },
          egressContext(mode, `sess-codex-${mode}`, refusals),
        ),
      );
      expect(terminalOf(messages)).toMatchObject({ type: 'terminal.completed' });
      const requests = responses.requestsFor(`egress-tool-${mode}`);
      expect(requests.length).toBeGreaterThanOrEqual(2);
      for (const r of requests) expect(r.headers.authorization).toBe(`Bearer ${KEYS.codex}`);
      expectContained(KEYS.codex, `sess-codex-${mode}`, refusals, dir);
    }, 90_000);

    it('Gemini: GOOGLE_GEMINI_BASE_URL to the bridge, placeholder GEMINI_API_KEY; the fake API gets the real x-goog-api-key', async () => {
      const dir = agentRoot(`gemini-${mode}`);
      mkdirSync(join(dir, 'home', '.gemini'), { recursive: true });
      gemini.setScript(`egress-tool-${mode}`, ({ body }) =>
        hasFunctionResponse(body)
          ? { text: 'done' }
          : {
              functionCalls: [
                { name: 'run_shell_command', args: { command: probeCommand(join(dir, 'work')), description: 'probe' } },
              ],
            },
      );
      const refusals: AttemptRefusal[] = [];
      const messages = await collect(
        runGemini(
          {
            prompt: 'probe',
            model: `egress-tool-${mode}`,
            cwd: join(dir, 'work'),
            configDir: join(dir, 'home', '.gemini'),
            approvalMode: 'yolo',
            command: geminiBin,
            env: {
              HOME: join(dir, 'home'),
              TMPDIR: join(dir, 'tmp'),
              SESSIOND_STATE_DIR: join(dir, 'state'),
              GEMINI_API_KEY: KEYS.gemini,
              GOOGLE_GEMINI_BASE_URL: gemini.url,
            },
          },
          egressContext(mode, `sess-gemini-${mode}`, refusals),
        ),
      );
      expect(terminalOf(messages)).toMatchObject({ type: 'terminal.completed' });
      const requests = gemini.requestsFor(`egress-tool-${mode}`);
      expect(requests.length).toBeGreaterThanOrEqual(2);
      for (const r of requests) expect(r.headers['x-goog-api-key']).toBe(KEYS.gemini);
      expectContained(KEYS.gemini, `sess-gemini-${mode}`, refusals, dir);
    }, 90_000);
  },
);
