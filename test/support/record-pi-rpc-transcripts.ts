/**
 * Records real `pi` (0.73.1) runs in `--mode rpc` against the fake model server into
 * test/fixtures/pi/ as `rpc-<name>.*`, driven the way sessiond's provider drives pi
 * (src/agents/pi/rpc.ts: `PiRpcTurn` decides every command written, and when stdin closes),
 * with a scenario's steers added at the named event.
 *
 *   node --import tsx test/support/record-pi-rpc-transcripts.ts            # every scenario
 *   node --import tsx test/support/record-pi-rpc-transcripts.ts steer      # names containing "steer"
 *
 * Per scenario: `rpc-<name>.stdout.jsonl` (byte for byte), `.stdin.jsonl` (the commands written),
 * `.stderr.txt`, `.exit`, `.requests.json` (the model requests' messages) and `.meta.json`
 * (timeline in ms since spawn). See test/fixtures/pi/README.md.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PiMapper } from '../../src/agents/pi/mapper.ts';
import { PiRpcTurn } from '../../src/agents/pi/rpc.ts';
import { hasToolResult, startFakeModelServer, type FakeModelServer, type Script } from './fake-model-server.ts';
import { createPiEnv, NO_DISCOVERY, piBin, REPO_ROOT, type PiEnv } from './pi-env.ts';

const OUT_DIR = join(REPO_ROOT, 'test', 'fixtures', 'pi');
const REC_ROOT = '/tmp/sessiond-pi-rec';

/** A steer the recorder writes when `at` (an event type) is first seen. */
interface ScenarioSteer {
  at: string;
  text: string;
}

interface Scenario {
  name: string;
  model: string;
  prompt: string;
  steers?: ScenarioSteer[];
  settings?: Record<string, unknown>;
  /** Keep the session in the env's session dir (and resume the one `resumes` names). */
  session?: boolean;
  resumes?: string;
}

const EXTRA_SCRIPTS: Record<string, Script> = {
  'steer-tool': ({ body }) =>
    hasToolResult(body)
      ? { text: 'Done, steered.' }
      : { toolCalls: [{ name: 'bash', arguments: { command: 'sleep 1; echo tool-done' } }] },
};

const SCENARIOS: Scenario[] = [
  { name: 'text', model: 'text', prompt: 'Say hello' },
  { name: 'thinking', model: 'thinking', prompt: 'Say hello' },
  { name: 'tool', model: 'tool', prompt: 'Run echo hi with bash' },
  { name: 'two-tools', model: 'two-tools', prompt: 'Run echo one and echo two' },
  { name: 'text-tool-text', model: 'text-tool-text', prompt: 'Run echo hi with bash' },
  { name: 'http500', model: 'http500', prompt: 'Say hello' },
  { name: 'midclose', model: 'midclose', prompt: 'Say hello' },
  {
    name: 'auto-retry-fail',
    model: 'http500',
    prompt: 'Say hello',
    settings: { retry: { enabled: true, maxRetries: 2, baseDelayMs: 100, provider: { maxRetries: 0 } } },
  },
  {
    name: 'steer-tool',
    model: 'steer-tool',
    prompt: 'Run the tool',
    steers: [{ at: 'tool_execution_start', text: 'Steering: also print the date.' }],
  },
  {
    name: 'steer-after-end',
    model: 'text',
    prompt: 'Say hello',
    steers: [{ at: 'agent_end', text: 'Too late: the turn is over.' }],
  },
  { name: 'session-first', model: 'text', prompt: 'first prompt', session: true },
  { name: 'session-resume', model: 'text', prompt: 'second prompt', session: true, resumes: 'session-first' },
];

interface Recorded {
  stdout: string;
  stdin: string;
  stderr: string;
  exit: string;
  timeline: { ms: number; what: string }[];
  sessionId: string | null;
}

function record(env: PiEnv, scenario: Scenario, resumeId: string | null): Promise<Recorded> {
  const args = ['--mode', 'rpc', ...NO_DISCOVERY, '--provider', 'fake', '--model', scenario.model];
  if (scenario.session === true) args.push('--session-dir', env.sessionDir);
  else args.push('--no-session');
  if (resumeId !== null) args.push('--session', resumeId);
  const started = Date.now();
  const child = spawn(piBin, args, { cwd: env.cwd, env: env.env, stdio: ['pipe', 'pipe', 'pipe'] });
  const out: Recorded = { stdout: '', stdin: '', stderr: '', exit: '', timeline: [], sessionId: null };
  const turn = new PiRpcTurn();
  const mapper = new PiMapper();
  const pendingSteers = [...(scenario.steers ?? [])];
  let steerCount = 0;
  const write = (line: string): void => {
    if (child.stdin.writableEnded) return;
    out.stdin += line;
    out.timeline.push({ ms: Date.now() - started, what: `in ${(JSON.parse(line) as { type: string }).type}` });
    child.stdin.write(line);
  };
  for (const line of turn.start(scenario.prompt)) write(line);
  let buffer = '';
  child.stdout.on('data', (chunk: Buffer) => {
    out.stdout += chunk.toString('utf8');
    buffer += chunk.toString('utf8');
    for (let at = buffer.indexOf('\n'); at >= 0; at = buffer.indexOf('\n')) {
      const line = buffer.slice(0, at);
      buffer = buffer.slice(at + 1);
      const event = JSON.parse(line) as { type: string; id?: unknown; data?: { sessionId?: string } };
      out.timeline.push({
        ms: Date.now() - started,
        what: `out ${event.type}${event.id ? ` ${String(event.id)}` : ''}`,
      });
      if (event.type === 'response' && typeof event.data?.sessionId === 'string')
        out.sessionId ??= event.data.sessionId;
      mapper.push(line);
      const step = turn.observe(line, mapper.agentEnded);
      // A scenario's steer goes in before the turn's own next command (as the provider's channel may).
      for (const steer of pendingSteers.filter((s) => s.at === event.type)) {
        pendingSteers.splice(pendingSteers.indexOf(steer), 1);
        steerCount += 1;
        for (const command of turn.steer({ promptId: `recorded-${steerCount}`, text: steer.text })) write(command);
      }
      for (const command of step.write) write(command);
      for (const promptId of step.delivered)
        out.timeline.push({ ms: Date.now() - started, what: `delivered ${promptId}` });
      if (step.settled) {
        out.timeline.push({ ms: Date.now() - started, what: 'close stdin' });
        child.stdin.end();
      }
    }
  });
  child.stderr.on('data', (chunk: Buffer) => (out.stderr += chunk.toString('utf8')));
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      clearTimeout(killer);
      out.exit = code !== null ? String(code) : String(signal);
      out.timeline.push({ ms: Date.now() - started, what: `exit ${out.exit}` });
      resolve(out);
    });
  });
}

async function main(): Promise<void> {
  const filters = process.argv.slice(2);
  const server: FakeModelServer = await startFakeModelServer();
  for (const [model, script] of Object.entries(EXTRA_SCRIPTS)) server.setScript(model, script);
  const sessions = new Map<string, { env: PiEnv; id: string | null }>();
  try {
    for (const scenario of SCENARIOS) {
      if (filters.length > 0 && !filters.some((f) => scenario.name.includes(f))) continue;
      const earlier = scenario.resumes === undefined ? undefined : sessions.get(scenario.resumes);
      const env =
        earlier?.env ??
        createPiEnv({
          serverUrl: server.url,
          root: join(REC_ROOT, `rpc-${scenario.name}`),
          extraModels: Object.keys(EXTRA_SCRIPTS),
          ...(scenario.settings === undefined ? {} : { settings: scenario.settings }),
        });
      const before = server.requests.length;
      const run = await record(env, scenario, earlier?.id ?? null);
      const name = `rpc-${scenario.name}`;
      writeFileSync(join(OUT_DIR, `${name}.stdout.jsonl`), run.stdout);
      writeFileSync(join(OUT_DIR, `${name}.stdin.jsonl`), run.stdin);
      writeFileSync(join(OUT_DIR, `${name}.stderr.txt`), run.stderr);
      writeFileSync(join(OUT_DIR, `${name}.exit`), `${run.exit}\n`);
      const requests = server.requests.slice(before).map((r) => ({
        model: r.model,
        messages: (r.body.messages ?? []).filter((m) => m.role !== 'system'),
      }));
      writeFileSync(join(OUT_DIR, `${name}.requests.json`), `${JSON.stringify(requests, null, 2)}\n`);
      const meta = { name, model: scenario.model, prompt: scenario.prompt, steers: scenario.steers ?? [] };
      writeFileSync(
        join(OUT_DIR, `${name}.meta.json`),
        `${JSON.stringify({ ...meta, timeline: run.timeline }, null, 2)}\n`,
      );
      if (scenario.session === true) sessions.set(scenario.name, { env, id: run.sessionId });
      else env.cleanup();
      console.log(`${name}: exit ${run.exit}, ${run.stdout.split('\n').length - 1} lines, ${requests.length} requests`);
    }
  } finally {
    await server.close();
    for (const { env } of sessions.values()) env.cleanup();
  }
}

await main();
