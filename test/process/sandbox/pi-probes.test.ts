import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import type { Server } from 'node:net';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { piSandboxFiles } from '../../../src/agents/pi/provider.ts';
import { prepareManagedAgentDir } from '../../../src/agents/pi/home.ts';
import { spawnAgent, type SandboxMode } from '../../../src/process/index.ts';
import { socketRelay, startFakeModelServer, type FakeModelServer } from '../../support/fake-model-server.ts';
import { createPiEnv, modelsJson, piArgs, piBin, type PiEnv } from '../../support/pi-env.ts';
import { liveSleeps } from '../../support/ps.ts';
import { startRedis, type RedisServer } from '../../support/redis.ts';

/**
 * A real pi attempt per mode whose bash tool probes what a prompt-injected tool could reach. The
 * model reaches the fake API only through a bridge (a host Unix socket relayed to it), as an attempt
 * reaches the egress proxy.
 */
const SECRET = 'planted-worker-secret-3f9c';
const PROBE = 'probe';

let server: FakeModelServer;
let relay: Server;
let relaySocket: string;
let redis: RedisServer;
let api: HttpServer;
let apiPort: number;
let pi: PiEnv;
let stateDir: string;
let otherCwd: string;
let otherSessionFile: string;
let homeEntry: string;

/** A probe line: whether `path` can be read (a dir listed, a file's content), not merely seen by stat. */
function readable(path: string, name: string): string {
  return `(if [ -d ${path} ]; then ls -A ${path}; else cat ${path}; fi) >/dev/null 2>&1 && echo ${name}=visible || echo ${name}=hidden`;
}

function probeScript(): string {
  const lines = [
    `echo "environ=$(cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c ${SECRET})"`,
    `(exec 3<>/dev/tcp/127.0.0.1/${String(redis.port)}) 2>/dev/null && echo redis=open || echo redis=refused`,
    `(exec 3<>/dev/tcp/127.0.0.1/${String(apiPort)}) 2>/dev/null && echo api=open || echo api=refused`,
    readable(join(otherCwd, 'secret.txt'), 'othercwd'),
    readable(otherSessionFile, 'othersession'),
    readable(join(homedir(), homeEntry), 'workerhome'),
    readable(join(stateDir, 'worker-state.json'), 'statedir'),
    `(echo x > ${join(dirname(pi.cwd), 'outside.txt')}) 2>/dev/null; (echo x > /usr/sandbox-probe) 2>/dev/null && echo usr=written || echo usr=refused`,
    `(echo x > .git/hooks/pre-commit) 2>/dev/null && echo hooks=written || echo hooks=refused`,
    `(echo x >> .git/config) 2>/dev/null && echo gitconfig=written || echo gitconfig=refused`,
    `echo in-workspace > inside.txt && echo workspace=written || echo workspace=refused`,
    `mount -t tmpfs none /mnt 2>/dev/null && echo mount=ok || echo mount=refused`,
    `mount -o remount,rw /usr 2>/dev/null && echo remount=ok || echo remount=refused`,
    `unshare -U true 2>/dev/null && echo unshare=ok || echo unshare=refused`,
    // A tool that tries to leave its attempt's cgroup, then lingers: it must be gone when the turn ends.
    `(moved=refused; for f in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/unified/cgroup.procs /sys/fs/cgroup/unified/sessiond/cgroup.procs $(find /sys/fs/cgroup -maxdepth 3 -name cgroup.procs 2>/dev/null); do echo $BASHPID > $f 2>/dev/null && moved=ok; done; echo cgroup=$moved; exec sleep 4242) & sleep 0.3`,
  ];
  return lines.join('\n');
}

let holder: ChildProcess;

beforeAll(async () => {
  // A process of the worker's with a secret in its environment (as `serve` and the worker hold the Redis password).
  holder = spawn('sleep', ['600'], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', SESSIOND_PLANTED: SECRET },
    stdio: 'ignore',
  });
  server = await startFakeModelServer({ chunkDelayMs: 1 });
  // The bridge's far end: a Unix socket relayed to the fake model's TCP port (the egress proxy's place).
  pi = createPiEnv({ serverUrl: server.url, extraModels: [PROBE] });
  relaySocket = join(pi.root, 'model.sock');
  relay = await socketRelay(relaySocket, server.port);
  redis = await startRedis();
  api = createHttpServer((_, res) => res.end('sessiond api'));
  await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
  apiPort = (api.address() as { port: number }).port;
  stateDir = join(pi.root, 'state');
  mkdirSync(stateDir, { recursive: true });
  writeFileSync(join(stateDir, 'worker-state.json'), '{}');
  otherCwd = join(pi.root, 'other-work');
  mkdirSync(otherCwd, { recursive: true });
  writeFileSync(join(otherCwd, 'secret.txt'), 'another session');
  const otherSessions = join(pi.agentDir, 'sessions', `--${otherCwd.slice(1).replaceAll('/', '-')}--`);
  mkdirSync(otherSessions, { recursive: true });
  otherSessionFile = join(otherSessions, 'conversation.jsonl');
  writeFileSync(otherSessionFile, '{}\n');
  execFileSync('git', ['init', '-q', pi.cwd]);
  homeEntry = readdirSync(homedir()).find((e) => !e.startsWith('.cache') && e !== '.local') ?? '.';
}, 60_000);

afterAll(async () => {
  holder.kill('SIGKILL');
  await Promise.all([
    server.close(),
    new Promise((r) => relay.close(r)),
    new Promise((r) => api.close(r)),
    redis.stop(),
  ]);
  pi.cleanup();
});

async function probe(mode: SandboxMode): Promise<Record<string, string>> {
  server.reset();
  server.setScript(PROBE, [
    { toolCalls: [{ name: 'bash', arguments: { command: probeScript() } }] },
    { text: 'probed' },
  ]);
  const agentDir = await prepareManagedAgentDir(pi.agentDir, stateDir);
  const result = await spawnAgent({
    command: piBin,
    args: piArgs({
      model: PROBE,
      prompt: 'run the probe',
      session: { dir: join(pi.agentDir, 'sessions', `--${pi.cwd.slice(1).replaceAll('/', '-')}--`) },
    }),
    cwd: pi.cwd,
    env: { ...pi.env, PI_CODING_AGENT_DIR: agentDir },
    sandbox: { mode, ...(await piSandboxFiles(agentDir, undefined, pi.cwd)) },
    bridges: [{ name: 'model', socket: relaySocket }],
    finalize: (urls) => {
      // pi's models.json (linked into the managed dir) points at the bridge.
      writeFileSync(
        join(pi.agentDir, 'models.json'),
        JSON.stringify(modelsJson(`${urls.model ?? ''}/v1`, [PROBE], [])),
      );
      return {};
    },
  });
  if (!result.ok) throw new Error(result.error);
  expect(result.agent.sandbox).toBe(mode);
  const out: string[] = [];
  for await (const line of result.agent.lines()) out.push(line);
  const exit = await result.agent.exited;
  await result.agent.stop();
  expect(exit.exitCode, result.agent.stderrTail()).toBe(0);
  const toolResult = server.requests.flatMap((r) => r.body.messages).find((m) => m?.role === 'tool');
  const text = typeof toolResult?.content === 'string' ? toolResult.content : JSON.stringify(toolResult?.content ?? '');
  return Object.fromEntries([...text.matchAll(/^(\w+)=(\S+)$/gm)].map((m) => [m[1] ?? '', m[2] ?? '']));
}

describe('a real pi attempt probing its sandbox', () => {
  it('bwrap: no worker secret, Redis and the API refuse, other files hidden, writes confined, no mount/userns, no cgroup escape', async () => {
    const seen = await probe('bwrap');
    expect(seen).toEqual({
      environ: '0',
      redis: 'refused',
      api: 'refused',
      othercwd: 'hidden',
      othersession: 'hidden',
      workerhome: 'hidden',
      statedir: 'hidden',
      usr: 'refused',
      hooks: 'refused',
      gitconfig: 'refused',
      workspace: 'written',
      mount: 'refused',
      remount: 'refused',
      unshare: 'refused',
      cgroup: 'refused',
    });
    expect(existsSync(join(dirname(pi.cwd), 'outside.txt'))).toBe(false);
    expect(existsSync(join(pi.cwd, 'inside.txt'))).toBe(true);
    expect(liveSleeps([4242])).toEqual([]);
  });

  it('landlock: writes and TCP confined, other processes’ environ unreadable; what it cannot stop is what docs/sandbox.md lists', async () => {
    const seen = await probe('landlock');
    expect(seen).toMatchObject({
      environ: '0',
      redis: 'refused',
      api: 'refused',
      othercwd: 'hidden',
      othersession: 'hidden',
      workerhome: 'hidden',
      statedir: 'hidden',
      usr: 'refused',
      workspace: 'written',
      mount: 'refused',
      remount: 'refused',
      cgroup: 'refused',
      // Landlock cannot narrow the writable workspace (LANDLOCK_GAPS).
      hooks: 'written',
    });
    expect(existsSync(join(dirname(pi.cwd), 'outside.txt'))).toBe(false);
    expect(liveSleeps([4242])).toEqual([]);
  });

  it('none: the probe reaches what the worker can (the gaps the start-up log and /readyz report), and the sweep still ends the escaped tool', async () => {
    const seen = await probe('none');
    expect(seen).toMatchObject({
      environ: expect.not.stringMatching(/^0$/) as unknown,
      redis: 'open',
      api: 'open',
      othercwd: 'visible',
      statedir: 'visible',
      cgroup: 'ok',
    });
    expect(liveSleeps([4242])).toEqual([]);
  });
});
