export type { AgentProcess, ExitInfo, SpawnResult, SpawnSpec, StopReason } from './types.ts';
export { spawnAgent } from './spawn-agent.ts';
export { GRACEFUL_STOP_TIMEOUT_MS, KILL_WAIT_TIMEOUT_MS } from './stop-process.ts';
export {
  AGENT_MARKER_ENV,
  findMarkedProcesses,
  findProcessesByMarker,
  isAlive,
  killProcessTree,
  processStartTime,
  type KillTreeOptions,
  type KillTreeResult,
  type MarkedProcess,
  type TrackedProcess,
} from './process-tree.ts';
export { LineSplitter, splitLines } from './split-lines.ts';
export { DEFAULT_STDERR_TAIL_BYTES, StderrTail } from './stderr-tail.ts';
export { baseEnv, isBaseEnvName, pickEnv, withoutSessiondEnv, SESSIOND_ENV } from './sealed-env.ts';
export {
  createAttemptCgroup,
  detectContainment,
  killAttemptCgroup,
  killEscapees,
  listAttemptCgroups,
  type AttemptCgroup,
  type AttemptLimits,
  type ContainmentInfo,
} from './cgroup.ts';
export type { FinalSpawn } from './types.ts';
export {
  detectSandbox,
  probeMode,
  SANDBOX_REFUSED,
  type Bridge,
  type SandboxFiles,
  type SandboxInfo,
  type SandboxMode,
  type SandboxRequest,
  type SandboxSetting,
} from './sandbox/index.ts';
