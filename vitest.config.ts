import { defineConfig } from 'vitest/config';

/**
 * The suites are split so `npm test` stays within its time budget (~15 min on a 2-core host):
 * - `core` (`npm test`): every suite on a single redis-server, each agent's real CLI at least once
 *   (the ACP client on the real gemini, with its approval flow); a real Redis Cluster still runs in
 *   `test/runtime/redis/cluster.test.ts` and `partitions.test.ts`.
 * - `cluster` (`npm run test:cluster`): the runtime suites written with `describe.each(BACKENDS)` on a
 *   real 3-master Redis Cluster, and the `WAIT` failover test.
 * - `agents` (`npm run test:agents`): the real-CLI suites of Qwen Code, OpenCode and the Claude Code
 *   ACP adapter (their own suites, their approval flows, their runs through the session machine) and
 *   `sessiond agents` asking each ACP agent.
 * - `long` (`npm run test:long`): the quick chaos run, the package test (npm pack, a fresh install)
 *   and the 200 sessions under a fleet limit.
 * - `sandboxed`: the process containment suites again, their agents in a bwrap sandbox
 *   (`SESSIOND_TEST_SANDBOX=bwrap`, see test/support/processes.ts).
 * - `all` (`npm run test:all`): everything, on both backends.
 * The files of HOST_SANDBOX run in the host's own sandbox (`SESSIOND_SANDBOX` as set, else `auto`:
 * bwrap where it works), as a deployment does; the rest run unsandboxed (`SESSIOND_SANDBOX=none`
 * unless set) because they were not yet checked in bwrap, where their fake models are reached through
 * the egress bridges. The sandbox's own suites force each mode.
 * `SESSIOND_TEST_SET` picks the set; `SESSIOND_TEST_BACKENDS` (read by test/support/runtime.ts) the backends.
 */
const CLUSTER_VARIANTS = ['crash', 'lease', 'backoff', 'cancel', 'enqueue'].map((name) => `test/runtime/${name}.test.ts`);
const CLUSTER_ONLY = ['test/runtime/wait-replicas.test.ts'];
const AGENT_SUITES = [
  ...['qwen', 'opencode', 'claude'].map((name) => `test/agents/acp/${name}-acp.test.ts`),
  ...['acp-clis-approvals', 'acp-clis-runtime', 'agents-command'].map((name) => `test/agents/acp/${name}.test.ts`),
  // The four real CLIs in each sandbox mode through the egress proxy.
  'test/agents/egress.test.ts',
];
const LONG_SUITES = ['test/chaos/chaos.test.ts', 'test/package/package.test.ts', 'test/runtime/limits.test.ts'];
const CONTAINMENT_SUITES = ['containment', 'spawn-agent', 'stop-process', 'process-tree'].map((name) => `test/process/${name}.test.ts`);
/** Checked to pass in bwrap (see above): a folder (ending in /) or a file. */
const HOST_SANDBOX = ['test/process/', 'test/runtime/containment.test.ts', 'test/runtime/sandbox-inspect.test.ts'];

const SETS = {
  core: { include: ['test/**/*.test.ts'], exclude: [...CLUSTER_ONLY, ...AGENT_SUITES, ...LONG_SUITES], backends: 'single' },
  cluster: { include: [...CLUSTER_VARIANTS, ...CLUSTER_ONLY], exclude: [], backends: 'cluster' },
  agents: { include: AGENT_SUITES, exclude: [], backends: 'single' },
  long: { include: LONG_SUITES, exclude: [], backends: 'single' },
  sandboxed: { include: CONTAINMENT_SUITES, exclude: [], backends: 'single', sandbox: 'bwrap' },
  all: { include: ['test/**/*.test.ts'], exclude: [], backends: 'single,cluster' },
} as const;

const name = process.env.SESSIOND_TEST_SET ?? 'core';
if (!(name in SETS)) throw new Error(`SESSIOND_TEST_SET: unknown set '${name}' (one of ${Object.keys(SETS).join(', ')})`);
const set = SETS[name as keyof typeof SETS];

const env = {
  SESSIOND_TEST_BACKENDS: process.env.SESSIOND_TEST_BACKENDS ?? set.backends,
  ...('sandbox' in set ? { SESSIOND_TEST_SANDBOX: set.sandbox } : {}),
};
const exclude = ['**/node_modules/**', ...set.exclude];
// The set's files that run in the host's sandbox: all of HOST_SANDBOX for a set of every file, else those it names.
const wholeTree = (set.include as readonly string[]).includes('test/**/*.test.ts');
const hostSandboxed = wholeTree
  ? HOST_SANDBOX.map((entry) => (entry.endsWith('/') ? `${entry}**/*.test.ts` : entry))
  : set.include.filter((file) => HOST_SANDBOX.some((entry) => file === entry || (entry.endsWith('/') && file.startsWith(entry))));
const projects = [
  { extends: true as const, test: { name: 'host-sandbox', include: hostSandboxed, exclude, env: { ...env, SESSIOND_SANDBOX: process.env.SESSIOND_SANDBOX ?? 'auto' } } },
  {
    extends: true as const,
    test: {
      name: 'unsandboxed',
      include: [...set.include],
      exclude: [...exclude, ...HOST_SANDBOX.map((entry) => (entry.endsWith('/') ? `${entry}**` : entry))],
      env: { ...env, SESSIOND_SANDBOX: process.env.SESSIOND_SANDBOX ?? 'none' },
    },
  },
].filter((project) => project.test.include.length > 0);

export default defineConfig({
  test: {
    projects,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 2,
  },
});
