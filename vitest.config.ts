import { defineConfig } from 'vitest/config';

/**
 * The suites are split so `npm test` stays within its time budget (~15 min on a 2-core host, with
 * `npm ci` and `npm run check`):
 * - `core` (`npm test`): every suite on a single redis-server, with the real pi CLI (the reference
 *   agent) and the ACP client on a fake ACP agent; a real Redis Cluster still runs in
 *   `test/runtime/redis/cluster.test.ts` (cross-slot refusal, failover of a connection).
 * - `unit` (`npm run test:unit`): the pure suites alone (also in `core`): no Redis, no agent CLI, no
 *   network, and no agent-CLI install first (no `pretest:unit`).
 * - `cluster` (`npm run test:cluster`): the runtime suites written with `describe.each(BACKENDS)` on a
 *   real 3-master Redis Cluster, the `WAIT` failover test, and the partitioned queue on a cluster
 *   (`partitions.test.ts`, moved from `core`: it boots a cluster of its own and enqueues 1,500
 *   sessions to measure the spread over the masters; cluster behaviour belongs to this set).
 * - `agents` (`npm run test:agents`): the real-CLI suites of Claude Code, Codex and Gemini (their
 *   providers, Claude Code's approvals, the ACP client on the real gemini with its approval flow:
 *   moved from `core` when the suite outgrew its budget on a slower host), of Qwen Code, OpenCode and
 *   the Claude Code ACP adapter (their own suites, their approval flows, their runs through the
 *   session machine), whenBusy steer and interrupt on the real Claude Code, Codex, Gemini, Qwen Code and
 *   gemini --acp, the four real CLIs through the egress proxy, `sessiond agents` asking each
 *   ACP agent, workspaces with Claude Code, Codex, Gemini and `acp:gemini` across two worker
 *   processes, and docs/getting-started.md run command by command (real pi and Claude Code).
 * - `long` (`npm run test:long`): the quick chaos run, the package test (npm pack, a fresh install),
 *   the 200 sessions under a fleet limit, and, moved from `core` for the budget: 500 concurrent SSE
 *   clients against one `serve` (`sse-load.test.ts`, a load test split out of `streams.test.ts`,
 *   whose limits, hub and tickets stay in `core`); the CLI bundle driven through every fast command
 *   with real pi turns (`bundle.test.ts`: the same commands run through the sources in `core`'s
 *   `runtime-commands.test.ts` and friends, and the package test runs the installed bundle); the
 *   dashboard's approval, delete and workspace buttons and its Schedules page in a real browser (`approval-buttons`,
 *   `delete-button`, `workspace-buttons`, `schedules-page.test.ts`: the routes they call are tested over HTTP in `core`, and the
 *   dashboard's other browser suites stay there); schedules through worker processes (`schedules.test.ts`:
 *   their spec's unit suite stays in `core`); workspaces in the runtime (`workspaces*.test.ts`: the module's
 *   own suites under test/workspace/ stay in `core`) and retention's expiry timelines (`lifecycle/retention.test.ts`; deletion and the HTTP lifecycle stay in `core`).
 * - `all` (`npm run test:all`): everything, on both backends.
 * The files of HOST_SANDBOX run in the host's own sandbox (`SESSIOND_SANDBOX` as set, else `auto`:
 * bwrap where it works), as a deployment does; the rest run unsandboxed (`SESSIOND_SANDBOX=none`
 * unless set) because they were not yet checked in bwrap, where their fake models are reached through
 * the egress bridges. The sandbox's own suites force each mode, and the containment suites
 * (test/process/{containment,spawn-agent,stop-process,process-tree}, test/runtime/{containment,
 * turn-timeout}) run every case once per mode of SANDBOX_MODES (test/support/processes.ts: none and
 * bwrap, bwrap required; `SESSIOND_TEST_SANDBOX=none,bwrap,landlock` names others), in every set.
 * `SESSIOND_TEST_SET` picks the set; `SESSIOND_TEST_BACKENDS` (read by test/support/runtime.ts) the backends.
 */
const CLUSTER_VARIANTS = [
  ...['crash', 'lease', 'backoff', 'cancel', 'enqueue', 'schedules'].map((name) => `test/runtime/${name}.test.ts`),
  'test/runtime/webhooks/delivery.test.ts',
  'test/runtime/webhooks/session-webhooks.test.ts',
];
const CLUSTER_ONLY = ['test/runtime/wait-replicas.test.ts', 'test/runtime/partitions.test.ts'];
const AGENT_SUITES = [
  ...['qwen', 'opencode', 'claude'].map((name) => `test/agents/acp/${name}-acp.test.ts`),
  ...['acp-clis-approvals', 'acp-clis-runtime', 'agents-command'].map((name) => `test/agents/acp/${name}.test.ts`),
  // The four real CLIs in each sandbox mode through the egress proxy.
  'test/agents/egress.test.ts',
  // The real Claude Code, Codex and Gemini CLIs (moved from core for its budget; pi stays there).
  'test/agents/claude-code/provider.test.ts',
  'test/agents/claude-code/approvals-runtime.test.ts',
  'test/agents/claude-code/cancel-runtime.test.ts',
  'test/agents/codex/provider.test.ts',
  'test/agents/codex/cancel-runtime.test.ts',
  'test/agents/gemini/provider.test.ts',
  'test/agents/gemini/cancel-runtime.test.ts',
  'test/agents/acp/gemini-acp.test.ts',
  'test/agents/acp/gemini-acp-runtime.test.ts',
  // whenBusy steer (the fallback; native on acp:claude) and interrupt on the real Claude Code, Codex, Gemini and ACP agents.
  'test/agents/steer-agents.test.ts',
  // A fallback steer and a kill -9 of its worker before and after its record: delivered once (the real Claude Code).
  'test/agents/steer-crash.test.ts',
  // Workspaces with the real Claude Code, Codex, Gemini and acp:gemini across two worker processes.
  'test/agents/workspaces-agents.test.ts',
  // docs/getting-started.md run command by command: the demo, a worker, real pi and Claude Code.
  'test/docs/getting-started.test.ts',
];
// The pure suites: no Redis, no agent CLI, no process of an agent, no network (mappers, the machine,
// retry, policy, config, the CLI's parsing). A new suite of pure logic belongs here too.
const UNIT_SUITES = [
  'test/agents/acp/opencode-retries.test.ts',
  'test/agents/acp/qwen-retries.test.ts',
  'test/agents/claude-code/control.test.ts',
  'test/agents/claude-code/mapper.property.test.ts',
  'test/agents/claude-code/session-file.test.ts',
  'test/agents/codex/home.test.ts',
  'test/agents/codex/mapper.property.test.ts',
  'test/agents/codex/options.test.ts',
  'test/agents/gemini/home.test.ts',
  'test/agents/gemini/mapper.property.test.ts',
  'test/agents/gemini/session-file.test.ts',
  'test/agents/pi/home.test.ts',
  'test/agents/pi/session-file-cut.test.ts',
  'test/agents/pi/mapper.property.test.ts',
  'test/agents/shared/agent-env.test.ts',
  'test/agents/shared/reset-time.test.ts',
  'test/agents/shared/trace-env.test.ts',
  'test/bench/peers-log-checks.test.ts',
  'test/config/client-settings.test.ts',
  'test/config/defaults.test.ts',
  'test/config/duration.test.ts',
  'test/errors.test.ts',
  'test/fuzz/cli-args.test.ts',
  'test/fuzz/pi-mapper.test.ts',
  'test/interfaces/cli/agent-names.test.ts',
  'test/interfaces/cli/entry.test.ts',
  'test/interfaces/cli/retry-flags.test.ts',
  'test/interfaces/web/chart-layout.test.ts',
  'test/interfaces/web/routes.test.ts',
  'test/machines/operator-retry.test.ts',
  'test/machines/quota-wall.test.ts',
  'test/machines/session.machine.test.ts',
  'test/machines/session.model.test.ts',
  'test/machines/states.test.ts',
  'test/machines/turn-timeout.test.ts',
  'test/policy/check.test.ts',
  'test/process/idle-timer.test.ts',
  'test/process/split-lines.test.ts',
  'test/process/stderr-tail.test.ts',
  'test/retry/backoff.test.ts',
  'test/retry/classify.test.ts',
  'test/retry/index.test.ts',
  'test/retry/policy.test.ts',
  'test/runtime/attempt-tally.test.ts',
  'test/runtime/deployment-policy.test.ts',
  'test/runtime/lifecycle/archive-workspace.test.ts',
  'test/runtime/lifecycle/fork.test.ts',
  'test/runtime/limits/config.test.ts',
  'test/runtime/self-fence.test.ts',
  'test/runtime/session-loop/agent-only.test.ts',
  'test/runtime/session-loop/session-log.test.ts',
  'test/runtime/take-back.test.ts',
  'test/runtime/session-loop/message-sink.test.ts',
  'test/runtime/tracing/trace-context.test.ts',
  'test/runtime/turn-prompts.test.ts',
  'test/runtime/webhooks/destination.test.ts',
  'test/config/webhooks.test.ts',
  'test/runtime/schedules/spec.test.ts',
];
const LONG_SUITES = [
  'test/chaos/chaos.test.ts',
  'test/package/package.test.ts',
  'test/runtime/limits.test.ts',
  'test/interfaces/http/sse-load.test.ts',
  'test/interfaces/cli/bundle.test.ts',
  'test/interfaces/web/approval-buttons.test.ts',
  'test/interfaces/web/delete-button.test.ts',
  'test/interfaces/web/workspace-buttons.test.ts',
  'test/interfaces/web/schedules-page.test.ts',
  // Moved from core for its budget: schedules through worker processes (~75 s; their spec's unit suite stays in
  // core, and the cluster set runs them too), workspaces in the runtime (test/workspace/ and the workspace cases of
  // other core suites stay there) and retention's expiry timelines (deletion and the HTTP lifecycle stay in core).
  'test/runtime/schedules.test.ts',
  'test/runtime/workspaces.test.ts',
  'test/runtime/workspaces-hosts.test.ts',
  'test/runtime/lifecycle/workspace-transfer.test.ts',
  'test/runtime/workspaces-turns.test.ts',
  'test/runtime/workspaces-cancel-race.test.ts',
  'test/runtime/lifecycle/retention.test.ts',
];
/** Checked to pass in bwrap (see above): a folder (ending in /) or a file. */
const HOST_SANDBOX = ['test/process/', 'test/runtime/containment.test.ts', 'test/runtime/sandbox-inspect.test.ts'];

const SETS = {
  core: {
    include: ['test/**/*.test.ts'],
    exclude: [...CLUSTER_ONLY, ...AGENT_SUITES, ...LONG_SUITES],
    backends: 'single',
  },
  unit: { include: UNIT_SUITES, exclude: [], backends: 'single' },
  cluster: { include: [...CLUSTER_VARIANTS, ...CLUSTER_ONLY], exclude: [], backends: 'cluster' },
  agents: { include: AGENT_SUITES, exclude: [], backends: 'single' },
  long: { include: LONG_SUITES, exclude: [], backends: 'single' },
  all: { include: ['test/**/*.test.ts'], exclude: [], backends: 'single,cluster' },
} as const;

const name = process.env.SESSIOND_TEST_SET ?? 'core';
if (!(name in SETS))
  throw new Error(`SESSIOND_TEST_SET: unknown set '${name}' (one of ${Object.keys(SETS).join(', ')})`);
const set = SETS[name as keyof typeof SETS];

const env = { SESSIOND_TEST_BACKENDS: process.env.SESSIOND_TEST_BACKENDS ?? set.backends };
const exclude = ['**/node_modules/**', ...set.exclude];
// The set's files that run in the host's sandbox: all of HOST_SANDBOX for a set of every file, else those it names.
const wholeTree = (set.include as readonly string[]).includes('test/**/*.test.ts');
const hostSandboxed = wholeTree
  ? HOST_SANDBOX.map((entry) => (entry.endsWith('/') ? `${entry}**/*.test.ts` : entry))
  : set.include.filter((file) =>
      HOST_SANDBOX.some((entry) => file === entry || (entry.endsWith('/') && file.startsWith(entry))),
    );
const projects = [
  {
    extends: true as const,
    test: {
      name: 'host-sandbox',
      include: hostSandboxed,
      exclude,
      env: { ...env, SESSIOND_SANDBOX: process.env.SESSIOND_SANDBOX ?? 'auto' },
    },
  },
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
