/**
 * Scenario `failover` (and `failover-nowait`): sessions running on real worker processes against a
 * real Redis Cluster (3 masters + 3 replicas, AOF, 6 queue partitions), and the master holding the
 * most sessions that are being driven `kill -9`ed mid-run; the cluster promotes its replica, the
 * workers carry on; HELD_WINDOW_MS later the killed node is started again (it rejoins as the new
 * master's replica), as an operator would. With SESSIOND_REDIS_WAIT_REPLICAS=1 every check of the other scenarios must
 * hold. Without it the same checks are run and reported, but not enforced: Redis replication is
 * asynchronous, and what the promoted replica did not have is lost. Both report the last message
 * each session of that master had stored, read just before the kill, looked up again after the
 * failover by its seq.
 */
import type { Ledger } from '../ledger.ts';
import { sleep, type ScenarioContext, type ScenarioDefinition, type ScenarioNotes } from '../scenario.ts';
import { sendCommands } from '../../src/runtime/redis/probe.ts';
import { keySlot } from '../../src/runtime/redis/slot.ts';
import { internals } from '../../src/runtime/internals.ts';

/** How long the sessions of the promoted master are watched before the killed node is started again. */
const HELD_WINDOW_MS = 8000;

/** Whether the node on `port` is a replica with its master link up, within `timeoutMs`. */
async function waitForReplica(port: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const result = await sendCommands({ port, timeoutMs: 1000 }, [['INFO', 'replication']]);
    const reply = result.ok ? result.replies[0] : undefined;
    if (reply?.kind === 'bulk' && reply.value.includes('role:slave') && reply.value.includes('master_link_status:up'))
      return true;
    await sleep(250);
  }
  return false;
}

const POLICY = { maxAttempts: 100, initialDelayMs: 150, multiplier: 1.5, maxDelayMs: 1000, jitter: 'none' };

/** Which master's port serves each slot range now (CLUSTER SLOTS). */
async function slotOwners(ctx: ScenarioContext): Promise<Array<{ from: number; to: number; port: number }>> {
  const layout = (await internals(ctx.cluster.runtime).redis.cluster('SLOTS')) as unknown as Array<
    [number, number, [string, number]]
  >;
  return layout.map(([from, to, master]) => ({ from, to, port: Number(master[1]) }));
}

export function failoverScenario(wait: boolean): ScenarioDefinition {
  return {
    name: wait ? 'failover' : 'failover-nowait',
    title: `a Redis Cluster master kill -9ed mid-run, ${wait ? 'with SESSIOND_REDIS_WAIT_REPLICAS=1' : 'without WAIT (what is lost is reported, not enforced)'}`,
    settleMs: 150_000,
    world: {
      backend: 'redis-cluster',
      queuePartitions: 6,
      workerEnv: wait ? { SESSIOND_REDIS_WAIT_REPLICAS: '1', SESSIOND_REDIS_WAIT_TIMEOUT: '1s' } : {},
    },
    enforced: wait,
    fullOnly: true,
    async run(ctx: ScenarioContext, ledger: Ledger, notes: ScenarioNotes) {
      const { cluster, random } = ctx;
      const redisCluster = cluster.redisCluster;
      if (redisCluster === null) throw new Error('failover needs a Redis Cluster world');
      const runtime = cluster.runtime;
      const count = ctx.quick ? 6 : 12;
      const ids = Array.from({ length: count }, () => ledger.newSessionId());
      // Two prompts each, long enough that the kill lands while they stream.
      for (const sessionId of ids)
        for (let i = 0; i < 2; i += 1)
          await ledger.enqueue(runtime, {
            sessionId,
            behaviour: `ok:${random.int(2500, 5000)}`,
            expect: 'completed',
            retryPolicy: POLICY,
          });
      await sleep(2500);

      // The victim: the master whose slots hold the most sessions being driven now.
      const owners = await slotOwners(ctx);
      const ownerOf = (id: string): number => {
        const slot = keySlot(internals(runtime).keys.session(id, 'meta'));
        return owners.find((o) => slot >= o.from && slot <= o.to)?.port ?? -1;
      };
      const leases = await Promise.all(
        ids.map((id) => internals(runtime).redis.get(internals(runtime).keys.session(id, 'lease'))),
      );
      const driven = new Map<number, number>();
      ids.forEach((id, i) => {
        if (leases[i] !== null) driven.set(ownerOf(id), (driven.get(ownerOf(id)) ?? 0) + 1);
      });
      const masters = await redisCluster.masters();
      const victim = [...masters].sort((a, b) => (driven.get(b.port) ?? 0) - (driven.get(a.port) ?? 0))[0];
      if (victim === undefined) throw new Error('no master');
      const onVictim = ids.filter((id) => ownerOf(id) === victim.port);
      // What each of its sessions had stored just before the kill: its last message.
      const before = new Map<string, { seq: string; content: string }>();
      for (const id of onVictim) {
        const last = (await internals(runtime).redis.xrevrange(
          internals(runtime).keys.session(id, 'log'),
          '+',
          '-',
          'COUNT',
          1,
        )) as Array<[string, string[]]>;
        const entry = last[0];
        if (entry !== undefined) before.set(id, { seq: entry[0], content: JSON.stringify(entry[1]) });
      }
      const killedAt = Date.now();
      await victim.server.kill();
      await redisCluster.waitHealthy(90_000).catch(() => undefined);
      const healedMs = Date.now() - killedAt;
      // The promoted replica has no replica of its own until the dead node is back: watch its sessions for a while.
      const seqOf = async (id: string): Promise<number> =>
        Number((await internals(runtime).redis.get(internals(runtime).keys.session(id, 'seq'))) ?? 0);
      const atHeal = await Promise.all(onVictim.map(seqOf));
      await sleep(HELD_WINDOW_MS);
      const afterWindow = await Promise.all(onVictim.map(seqOf));
      const unfinished = await runtime.sessionStates(onVictim);
      const held = onVictim.filter((id, i) => afterWindow[i] === atHeal[i] && unfinished[id] !== 'completed').length;
      // The operator's part: the dead node is started again, and rejoins as the replica of the promoted one.
      await victim.server.restart();
      const rejoined = await waitForReplica(victim.port, 60_000);
      const rejoinedMs = Date.now() - killedAt;
      // One more prompt each: the fleet carries on.
      for (const sessionId of ids)
        await ledger.enqueue(runtime, {
          sessionId,
          behaviour: `ok:${random.int(300, 1000)}`,
          expect: 'completed',
          retryPolicy: POLICY,
        });

      const lost: string[] = [];
      for (const [id, seen] of before) {
        const now = (await internals(runtime).redis.xrange(
          internals(runtime).keys.session(id, 'log'),
          seen.seq,
          seen.seq,
        )) as Array<[string, string[]]>;
        const entry = now[0];
        if (entry === undefined) lost.push(`${id}: message ${seen.seq} is gone`);
        else if (JSON.stringify(entry[1]) !== seen.content)
          lost.push(`${id}: message ${seen.seq} was lost and its seq reused by a later message`);
      }
      notes.did.push(
        `${count} sessions × 3 prompts on 3 worker processes, 6 partitions; kill -9 of master :${victim.port} (it held ${onVictim.length} sessions, ${driven.get(victim.port) ?? 0} of them being driven); the cluster was healthy again after ${(healedMs / 1000).toFixed(1)} s; the killed node started again ${HELD_WINDOW_MS / 1000} s later, ${rejoined ? `a replica again ${(rejoinedMs / 1000).toFixed(1)} s after the kill` : 'but not a linked replica within 60 s'}`,
      );
      notes.found.push(
        `in the ${HELD_WINDOW_MS / 1000} s after the failover, while the promoted master had no replica, ${held} of its ${onVictim.length} sessions stored nothing and had not completed${wait ? ' (WAIT 1 cannot be met there: their writes are held until a replica is back)' : ''}`,
      );
      // Read on the master, so not necessarily acknowledged yet (a batch waiting for its WAIT is visible there): a loss is reported, the checks judge the logs.
      notes.found.push(
        `of the last message each of those sessions had on the master just before the kill (${before.size} read): ${lost.length} lost after the failover${lost.length > 0 ? ` (${lost.slice(0, 4).join('; ')})` : ''}`,
      );
    },
  };
}

export const failover = failoverScenario(true);
export const failoverNoWait = failoverScenario(false);
