import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { sendCommands } from '../../src/runtime/redis/probe.ts';
import { startRedis, type RedisServer } from './redis.ts';

const run = promisify(execFile);

/**
 * A real Redis Cluster for a test file: 3 masters + 3 replicas of the system's redis-server on
 * free loopback ports, each in a temp dir of its own (see redis.ts: they die with the test
 * process however it ends), joined by `redis-cli --cluster create … --cluster-replicas 1`.
 * Ready once every node says `cluster_state:ok` and every master has its replica attached.
 */

export interface ClusterNode {
  readonly server: RedisServer;
  readonly port: number;
}

export interface RedisCluster {
  /** `redis+cluster://127.0.0.1:P1,127.0.0.1:P2,…` (every node as a seed). */
  readonly url: string;
  readonly nodes: readonly ClusterNode[];
  /** The nodes that are masters now (their roles change after a failover). */
  masters(): Promise<ClusterNode[]>;
  /** Waits until every live node says cluster_state:ok and knows a master for every slot. */
  waitHealthy(timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

export interface StartClusterOptions {
  /** `cluster-node-timeout` (ms): how long a master may be silent before its replica takes over. Default 2000. */
  nodeTimeoutMs?: number;
  /** AOF with fsync always on every node. */
  aof?: boolean;
}

const MASTERS = 3;
const READY_TIMEOUT_MS = 60_000;

async function info(port: number, section: string): Promise<Record<string, string> | null> {
  const result = await sendCommands(
    { port, timeoutMs: 1000 },
    section === 'cluster' ? [['CLUSTER', 'INFO']] : [['INFO', section]],
  );
  const reply = result.ok ? result.replies[0] : undefined;
  if (reply?.kind !== 'bulk') return null;
  const fields: Record<string, string> = {};
  for (const line of reply.value.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0 && !line.startsWith('#')) fields[line.slice(0, colon)] = line.slice(colon + 1);
  }
  return fields;
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function alive(node: ClusterNode): boolean {
  return (
    node.server.pid > 0 &&
    (() => {
      try {
        process.kill(node.server.pid, 0);
        return true;
      } catch {
        return false;
      }
    })()
  );
}

export async function startRedisCluster(options: StartClusterOptions = {}): Promise<RedisCluster> {
  const timeout = String(options.nodeTimeoutMs ?? 2000);
  const extraArgs = [
    '--cluster-enabled',
    'yes',
    '--cluster-config-file',
    'nodes.conf',
    '--cluster-node-timeout',
    timeout,
    '--cluster-replica-validity-factor',
    '0',
    '--cluster-require-full-coverage',
    'yes',
  ];
  const servers = await Promise.all(
    Array.from({ length: MASTERS * 2 }, () =>
      startRedis({ extraArgs, ...(options.aof === true ? { aof: true } : {}) }),
    ),
  );
  const nodes: ClusterNode[] = servers.map((server) => ({ server, port: server.port }));
  const stopAll = (): Promise<unknown> => Promise.all(servers.map((s) => s.stop()));
  try {
    await run(
      'redis-cli',
      ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '1', '--cluster-yes'],
      { timeout: 30_000 },
    );
  } catch (error) {
    await stopAll();
    throw new Error(`redis-cli --cluster create failed: ${(error as Error).message}`);
  }

  const cluster: RedisCluster = {
    url: `redis+cluster://${nodes.map((n) => `127.0.0.1:${n.port}`).join(',')}`,
    nodes,
    async masters() {
      const roles = await Promise.all(
        nodes.map(async (n) => (alive(n) ? (await info(n.port, 'replication'))?.role : undefined)),
      );
      return nodes.filter((_, i) => roles[i] === 'master');
    },
    async waitHealthy(timeoutMs = READY_TIMEOUT_MS) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const live = nodes.filter(alive);
        const states = await Promise.all(live.map((n) => info(n.port, 'cluster')));
        const replication = await Promise.all(live.map((n) => info(n.port, 'replication')));
        const masters = replication.filter((r) => r?.role === 'master');
        const ok =
          states.every((s) => s?.cluster_state === 'ok' && s.cluster_slots_ok === '16384') &&
          masters.length === MASTERS &&
          // Every replica that is alive is attached and in sync with its master.
          replication.filter((r) => r?.role === 'slave').every((r) => r?.master_link_status === 'up');
        if (ok) return;
        if (Date.now() > deadline)
          throw new Error(
            `the Redis Cluster did not become healthy within ${timeoutMs} ms: ${JSON.stringify(states.map((s) => s?.cluster_state))}`,
          );
        await delay(100);
      }
    },
    stop: async () => {
      await stopAll();
    },
  };
  try {
    await cluster.waitHealthy();
  } catch (error) {
    await stopAll();
    throw error;
  }
  return cluster;
}

/** A cluster in the place of one redis-server: url and stop() work; the whole-server controls (kill, restart, pause) throw, naming the nodes instead. */
export function clusterAsServer(cluster: RedisCluster): RedisServer {
  const first = cluster.nodes[0]?.server;
  if (first === undefined) throw new Error('a cluster without nodes');
  const refuse = (): never => {
    throw new Error("a whole-server control on a Redis Cluster: use the cluster's nodes instead");
  };
  return {
    url: cluster.url,
    port: first.port,
    dir: first.dir,
    pid: first.pid,
    password: undefined,
    stop: () => cluster.stop(),
    kill: refuse,
    restart: refuse,
    pause: refuse,
    resume: refuse,
  };
}
