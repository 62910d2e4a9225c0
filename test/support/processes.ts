import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe } from 'vitest';
import {
  findProcessesByMarker,
  isAlive,
  probeMode,
  spawnAgent,
  type AgentProcess,
  type SandboxMode,
  type SpawnSpec,
} from '../../src/process/index.ts';
import { resetSandboxDetection } from '../../src/process/sandbox/index.ts';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'agents');

/** Absolute path of a fake agent in test/fixtures/agents. */
export function fixture(name: string): string {
  return path.join(FIXTURES, name);
}

/** The minimal env a fake agent needs (PATH, to find `sleep`). */
export function baseEnv(): Record<string, string> {
  return { PATH: process.env.PATH ?? '/usr/bin:/bin' };
}

/**
 * The sandbox modes the containment suites run in, each suite once per mode (`describeInModes`):
 * unsandboxed and bubblewrap, whichever host runs them (bwrap is required: .ci/run installs it).
 * `SESSIOND_TEST_SANDBOX=bwrap,landlock` (a comma list) names others.
 */
export const SANDBOX_MODES: readonly SandboxMode[] = sandboxModes();

function sandboxModes(): SandboxMode[] {
  const raw = process.env.SESSIOND_TEST_SANDBOX;
  if (raw === undefined || raw.trim() === '') return ['none', 'bwrap'];
  const modes = raw.split(',').map((m) => m.trim());
  const unknown = modes.filter((m) => !['bwrap', 'landlock', 'none'].includes(m));
  if (unknown.length > 0 || modes.length === 0)
    throw new Error(`SESSIOND_TEST_SANDBOX: unknown mode(s) ${unknown.join(', ')} (bwrap, landlock, none)`);
  return modes as SandboxMode[];
}

/** The mode of the `describeInModes` block running now (null outside one: no sandbox). */
let current: SandboxMode | null = null;

/**
 * The sandbox part of a SpawnSpec in the current mode: none for 'none' (as the suites ran before
 * the sandbox), else that mode with the fixtures shown read-only.
 */
export function testSandbox(): Pick<SpawnSpec, 'sandbox'> {
  return current === null || current === 'none' ? {} : { sandbox: { mode: current, readOnly: [FIXTURES] } };
}

/**
 * Fails with the probe's reason when `mode` cannot make a sandbox on this host: a suite asked to
 * run sandboxed never passes unsandboxed.
 */
export function requireSandbox(mode: SandboxMode): void {
  const problem = probeMode(mode);
  if (problem !== null) throw new Error(`sandbox mode ${mode} is required on this host for this suite, but ${problem}`);
}

/**
 * In a describe block: the workers this test process starts in it (in-process, or as processes
 * through worker-process.ts) run their attempts in `mode`. SESSIOND_SANDBOX is read once per
 * process: set for the block, the decision forgotten before and after it.
 */
export function useWorkerSandbox(mode: SandboxMode): void {
  const before = process.env.SESSIOND_SANDBOX;
  beforeAll(() => {
    requireSandbox(mode);
    process.env.SESSIOND_SANDBOX = mode;
    resetSandboxDetection();
  });
  afterAll(() => {
    if (before === undefined) delete process.env.SESSIOND_SANDBOX;
    else process.env.SESSIOND_SANDBOX = before;
    resetSandboxDetection();
  });
}

/**
 * `describe(title)` once per mode of SANDBOX_MODES (`<title> [sandbox <mode>]`): in its body the
 * agents `spawnFixture` starts, and the spec `testSandbox()` gives, run in that mode.
 */
export function describeInModes(title: string, body: (mode: SandboxMode) => void): void {
  describe.each(SANDBOX_MODES)(`${title} [sandbox %s]`, (mode) => {
    beforeAll(() => {
      requireSandbox(mode);
      current = mode;
    });
    afterAll(() => {
      current = null;
    });
    body(mode);
  });
}

const started = new Set<AgentProcess>();

/** Spawns `node <fixture> ...args`; fails the test if it does not start. Stopped by `stopAllAgents()`. */
export async function spawnFixture(
  name: string,
  args: readonly string[] = [],
  spec: Partial<SpawnSpec> = {},
): Promise<AgentProcess> {
  const result = await spawnAgent({
    command: process.execPath,
    args: [fixture(name), ...args],
    env: baseEnv(),
    ...testSandbox(),
    ...spec,
  });
  if (!result.ok) throw new Error(`fixture ${name} did not start: ${result.error}`);
  started.add(result.agent);
  return result.agent;
}

/** Stops every agent a test started (and its whole tree); for `afterEach`. */
export async function stopAllAgents(): Promise<void> {
  const agents = [...started];
  started.clear();
  await Promise.all(agents.map((agent) => agent.stop()));
}

/** The next line of an iterator, or fails if stdout ends first. */
export async function nextLine(lines: AsyncIterator<string>): Promise<string> {
  const next = await lines.next();
  if (next.done === true) throw new Error('stdout ended before the expected line');
  return next.value;
}

/**
 * Reads lines until one parses as JSON with a `pids` array; returns the pids. An agent in a bwrap
 * sandbox prints the pids of its own PID namespace: with `agent`, they are turned into the host's.
 */
export async function readPids(lines: AsyncIterator<string>, agent?: AgentProcess): Promise<number[]> {
  for (;;) {
    const line = await nextLine(lines);
    if (!line.startsWith('{')) continue;
    const parsed = JSON.parse(line) as { pids?: unknown };
    if (!Array.isArray(parsed.pids)) continue;
    const pids = parsed.pids.map(Number);
    return agent?.sandbox === 'bwrap' ? pids.map((pid) => hostPid(agent, pid)) : pids;
  }
}

/** The host pid of `inner`, a pid of `agent`'s PID namespace (its init is bubblewrap's child); -1 when none. */
function hostPid(agent: AgentProcess, inner: number): number {
  const read = (file: string): string => {
    try {
      return readFileSync(file, 'utf8');
    } catch {
      return '';
    }
  };
  const init = Number(read(`/proc/${agent.pid}/task/${agent.pid}/children`).trim().split(' ')[0]);
  const ns = readlinkQuietly(`/proc/${init}/ns/pid`);
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const nspid = /^NSpid:\s+(.*)$/m
      .exec(read(`/proc/${entry}/status`))?.[1]
      ?.trim()
      .split(/\s+/);
    if (nspid === undefined || nspid.length < 2 || Number(nspid.at(-1)) !== inner) continue;
    if (ns !== null && readlinkQuietly(`/proc/${entry}/ns/pid`) === ns) return Number(entry);
  }
  return -1;
}

function readlinkQuietly(path: string): string | null {
  try {
    return readlinkSync(path);
  } catch {
    return null;
  }
}

/** In a bwrap sandbox, the agent is its PID namespace's only reason to live: what it leaves dies with it. */
export function outlivesAgent(agent: AgentProcess): boolean {
  return agent.sandbox !== 'bwrap';
}

/** Everything `items` yields (an agent's lines, an attempt's messages), once it ends. */
export async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const all: T[] = [];
  for await (const item of items) all.push(item);
  return all;
}

/** Pids among `pids` that are still live processes (zombies count as dead). */
export async function livePids(pids: readonly number[]): Promise<number[]> {
  const alive = await Promise.all(pids.map(async (pid) => ((await isAlive(pid)) ? pid : null)));
  return alive.filter((pid): pid is number => pid !== null);
}

/** Pids of live processes that still carry the agent's marker. */
export async function markedPids(agent: AgentProcess): Promise<number[]> {
  return (await findProcessesByMarker(agent.marker)).map((p) => p.pid);
}

/** Pids of live, non-zombie processes on this machine whose command line matches `pattern`. */
export function livePidsMatching(pattern: RegExp): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ');
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (pattern.test(cmdline) && stat[stat.lastIndexOf(')') + 2] !== 'Z') out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}
