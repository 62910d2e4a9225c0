import { execFileSync, spawnSync } from 'node:child_process';

/**
 * restate-server 1.7.12 asks api.github.com for its latest release at start-up, and no setting
 * stops it. So the peers benchmark runs in a network namespace of its own that has only a loopback
 * interface: nothing it starts can send a packet off this machine. (Everything it measures is on
 * 127.0.0.1 anyway.)
 */
const FLAG = 'SESSIOND_BENCH_NETNS';

export function inIsolatedNetwork(): boolean {
  return process.env[FLAG] === '1';
}

function has(command: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
}

/** Why this process cannot re-run itself isolated; null when it can. */
export function isolationProblem(): string | null {
  if (process.platform !== 'linux') return `${process.platform} has no network namespaces`;
  if (process.getuid?.() !== 0) return 'a network namespace needs root here (unshare --net)';
  for (const command of ['unshare', 'ip'])
    if (!has(command)) return `${command} is not installed (util-linux, iproute2)`;
  return null;
}

/** Re-runs this very command in a new network namespace (only loopback, brought up by the child); its exit code. */
export function rerunIsolated(): number {
  const result = spawnSync(
    'unshare',
    ['--net', '--', process.execPath, ...process.execArgv, ...process.argv.slice(1)],
    { stdio: 'inherit', env: { ...process.env, [FLAG]: '1' } },
  );
  return result.status ?? 1;
}

/** In the new namespace: its loopback interface up (it starts down). */
export function bringUpLoopback(): void {
  execFileSync('ip', ['link', 'set', 'lo', 'up']);
}
