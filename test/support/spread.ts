import { createRedis } from '../../src/runtime/redis/connection.ts';
import type { RedisCluster } from './redis-cluster.ts';

/**
 * What each master of a cluster served since `reset()`: commands (INFO commandstats, every
 * command's calls summed) and memory gained (INFO memory used_memory), in the order of
 * `cluster.masters()` at the time of the probe. For the keys-spread test, the spread script and
 * the cluster benchmark.
 */
export interface MasterProbe {
  readonly ports: readonly number[];
  reset(): Promise<void>;
  read(): Promise<{ commands: number[]; memory: number[] }>;
  close(): void;
}

export async function probeMasters(cluster: RedisCluster): Promise<MasterProbe> {
  const masters = await cluster.masters();
  const direct = masters.map((m) =>
    createRedis(`redis://127.0.0.1:${m.port}`, { role: 'spread-probe', log: () => undefined }),
  );
  const memory = async (): Promise<number[]> =>
    Promise.all(direct.map(async (d) => Number(/used_memory:(\d+)/.exec(await d.info('memory'))?.[1] ?? 0)));
  let base = direct.map(() => 0);
  return {
    ports: masters.map((m) => m.port),
    async reset() {
      await Promise.all(direct.map((d) => d.config('RESETSTAT')));
      base = await memory();
    },
    async read() {
      const commands = await Promise.all(
        direct.map(async (d) => {
          let calls = 0;
          for (const m of (await d.info('commandstats')).matchAll(/calls=(\d+)/g)) calls += Number(m[1]);
          return calls;
        }),
      );
      const now = await memory();
      return { commands, memory: now.map((n, i) => n - (base[i] ?? 0)) };
    },
    close() {
      direct.forEach((d) => d.disconnect());
    },
  };
}

/** max ÷ min of per-master figures (Infinity when one master got nothing). */
export function balance(values: readonly number[]): number {
  const min = Math.min(...values);
  return min <= 0 ? Number.POSITIVE_INFINITY : Math.max(...values) / min;
}
