import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  findProcessesByMarker,
  isAlive,
  spawnAgent,
  type AgentProcess,
  type SandboxMode,
  type SpawnSpec,
} from '../../src/process/index.ts';

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
 * `SESSIOND_TEST_SANDBOX=bwrap|landlock|none` runs the process tests' agents in that sandbox (the
 * `sandboxed` set of vitest.config.ts): the fixtures are shown to them read-only.
 */
export const TEST_SANDBOX = testSandbox();

function testSandbox(): Pick<SpawnSpec, 'sandbox'> {
  const mode = process.env.SESSIOND_TEST_SANDBOX;
  if (mode === undefined || mode === '') return {};
  if (!['bwrap', 'landlock', 'none'].includes(mode)) throw new Error(`SESSIOND_TEST_SANDBOX: unknown mode ${mode}`);
  return { sandbox: { mode: mode as SandboxMode, readOnly: [FIXTURES] } };
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
    ...TEST_SANDBOX,
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
