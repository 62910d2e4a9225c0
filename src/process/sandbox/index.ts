export type { Bridge, SandboxFiles, SandboxInfo, SandboxMode, SandboxRequest, SandboxSetting } from './types.ts';
export { detectSandbox, gapsOf, probeMode, resetSandboxDetection } from './detect.ts';
export { SANDBOX_REFUSED } from './plan.ts';
export { helperBinary } from './helper-binary.ts';
