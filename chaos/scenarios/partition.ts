/**
 * Scenario: a worker cut off from Redis while its agents run tools — a network partition. One worker
 * slot is restarted behind a TCP proxy on 127.0.0.1 (its only way to Redis); once it drives sessions
 * whose agents are in a tool (`stamp:<ms>`: the agent records the tool's lifetime, a timestamp every
 * 20 ms), the proxy is closed. The cut-off worker cannot renew its leases: it must stop its agents
 * (self-fencing) before the lease may lapse, so before any other worker starts the next attempt —
 * the tools' lifetimes of one session never overlap, by the agents' own clocks. The others take the
 * sessions over and complete them. Then the proxy comes back: the old worker finds the sessions
 * lost (released as stale) and writes nothing. The slot is then restarted on a direct connection.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { readLog } from '../checks.ts';
import type { ManagedWorker } from '../cluster.ts';
import type { Ledger } from '../ledger.ts';
import {
  check,
  sleep,
  waitFor,
  type ScenarioContext,
  type ScenarioDefinition,
  type ScenarioNotes,
} from '../scenario.ts';
import { internals } from '../../src/runtime/internals.ts';
import { TcpProxy } from '../../test/support/tcp-proxy.ts';

const POLICY = { maxAttempts: 10, initialDelayMs: 0, multiplier: 1, maxDelayMs: 100, jitter: 'none' };

function holderOf(token: string | null): string | null {
  return token === null ? null : token.slice(0, token.lastIndexOf('#'));
}

/** The tool runs of one prompt (tag), as its agents recorded them: [first, last] timestamp, by start. */
function toolRuns(dir: string, tag: string): Array<{ pid: string; first: number; last: number }> {
  let files: string[];
  try {
    files = readdirSync(dir);
  } catch {
    return [];
  }
  return files
    .filter((f) => f.startsWith(`${tag}.`))
    .map((f) => {
      const times = readFileSync(join(dir, f), 'utf8')
        .split('\n')
        .filter((l) => /^\d+$/.test(l))
        .map(Number);
      return { pid: f.slice(tag.length + 1), first: Math.min(...times), last: Math.max(...times) };
    })
    .filter((r) => Number.isFinite(r.first))
    .sort((a, b) => a.first - b.first);
}

export const partition: ScenarioDefinition = {
  name: 'partition',
  title: "a worker's connection to Redis cut while its agents run tools, then restored",
  settleMs: 60_000,
  async run(ctx: ScenarioContext, ledger: Ledger, notes: ScenarioNotes) {
    const { cluster, random } = ctx;
    const runtime = cluster.runtime;
    const redis = internals(runtime).redis;
    const keys = internals(runtime).keys;
    const stamps = join(cluster.stateDir, 'stamps');
    const rounds = ctx.quick ? 1 : 3;
    const overlaps: string[] = [];
    const violations: string[] = [];
    const found: string[] = [];
    let worstGapMs = Number.POSITIVE_INFINITY;
    let pairs = 0;
    const proxy = new TcpProxy(Number(new URL(cluster.redis.url).port));
    await proxy.open();
    let cut: ManagedWorker | null = null;
    try {
      for (let round = 1; round <= rounds; round++) {
        // One slot behind the proxy (a graceful restart: it gives its sessions back first).
        const slot = random.pick(cluster.liveWorkers()).slot;
        const old = cluster.workers[slot];
        if (old !== undefined && old.state !== 'dead') await cluster.terminate(old);
        cut = await cluster.startWorker(slot, proxy.url(cluster.redis.url));
        const prompts: Array<{ sessionId: string; tag: string }> = [];
        for (let i = 0; i < 6; i++) {
          const { sessionId } = await ledger.enqueue(runtime, {
            behaviour: `stamp:${random.int(6000, 9000)}`,
            expect: 'completed',
            retryPolicy: POLICY,
          });
          const tag = ledger.sessions.get(sessionId)?.prompts.at(-1)?.tag ?? '';
          prompts.push({ sessionId, tag });
        }
        // The cut-off worker drives sessions whose agents are in their tool.
        const worker = cut;
        const held = await waitFor(async () => {
          const leases = await Promise.all(prompts.map((p) => redis.get(keys.session(p.sessionId, 'lease'))));
          const mine = prompts.filter(
            (p, i) => holderOf(leases[i] ?? null) === worker.workerId && toolRuns(stamps, p.tag).length === 1,
          );
          return mine.length > 0 ? mine : null;
        }, 30_000);
        if (held === null) {
          violations.push(`round ${round}: the proxied worker ran no tool within 30 s`);
          continue;
        }
        await sleep(random.int(100, 600));
        const cutAt = Date.now();
        await proxy.close();
        const seqAtDone = new Map<string, number>();
        // Taken over by another worker (read directly: the proxied one can no longer say anything).
        const takenOver = await waitFor(
          async () => {
            const leases = await Promise.all(held.map((p) => redis.get(keys.session(p.sessionId, 'lease'))));
            return leases.every((l) => l !== null && holderOf(l) !== worker.workerId) ? Date.now() : null;
          },
          30_000,
          100,
        );
        if (takenOver === null) violations.push(`round ${round}: the cut-off worker's sessions were not taken over`);
        for (const p of held) {
          const ended = await waitFor(
            async () => ((await runtime.getSession(p.sessionId))?.context?.turn?.status === 'completed' ? true : null),
            40_000,
            250,
          );
          if (ended === null) violations.push(`${p.sessionId}: not completed on another worker within 40 s`);
          seqAtDone.set(p.sessionId, await internals(runtime).store.lastSeq(p.sessionId));
        }
        // Never two tools of one session at once, by the agents' own clocks.
        for (const p of held) {
          const runs = toolRuns(stamps, p.tag);
          if (runs.length < 2)
            violations.push(`${p.sessionId}: ${runs.length} tool run(s) recorded, 2 or more expected`);
          for (let i = 1; i < runs.length; i++) {
            const before = runs[i - 1];
            const after = runs[i];
            if (before === undefined || after === undefined) continue;
            pairs += 1;
            const gap = after.first - before.last;
            worstGapMs = Math.min(worstGapMs, gap);
            if (gap <= 0)
              overlaps.push(
                `${p.sessionId}: agent ${before.pid}'s tool ran until ${before.last}, agent ${after.pid}'s began at ${after.first} (${-gap} ms overlap)`,
              );
          }
        }
        // The network comes back: the old worker finds its sessions lost and writes nothing.
        await proxy.open();
        const reopenedAt = Date.now();
        const stale = await waitFor(
          () => {
            const out = worker.proc.output();
            return held.every((p) => new RegExp(`"sessionId":"${p.sessionId}"[^\\n]*"outcome":"stale"`).test(out))
              ? Date.now()
              : null;
          },
          30_000,
          200,
        );
        if (stale === null)
          violations.push(`round ${round}: the reconnected worker did not release every lost session as stale`);
        if (!worker.proc.output().includes('self-fenced'))
          violations.push(`round ${round}: the cut-off worker did not say it fenced itself`);
        // A heartbeat after the reconnection: whatever it had queued while cut off has been sent by now.
        const beat = async (): Promise<number> =>
          Number(JSON.parse((await redis.hget(keys.workers, worker.workerId)) ?? '{}').lastSeen ?? 0);
        const since = Math.max(reopenedAt, await beat());
        if ((await waitFor(async () => ((await beat()) > since ? true : null), 20_000, 200)) === null)
          violations.push(`round ${round}: no heartbeat of the reconnected worker within 20 s`);
        for (const p of held) {
          const log = await readLog(runtime, p.sessionId);
          const late = log.filter((m) => m.seq > (seqAtDone.get(p.sessionId) ?? 0));
          if (late.length > 0)
            violations.push(`${p.sessionId}: ${late.length} message(s) written after the turn completed elsewhere`);
          const view = await runtime.getSession(p.sessionId);
          const first = view?.context?.turn?.attempts.find((a) => a.attempt === 1);
          if (first !== undefined && first.outcome !== 'interrupted')
            violations.push(
              `${p.sessionId}: the cut-off worker's attempt is recorded ${first.outcome}, not interrupted`,
            );
        }
        found.push(
          `round ${round}: worker ${worker.pid} cut off while driving ${held.length} session(s) in a tool; taken over after ${takenOver === null ? '—' : ((takenOver - cutAt) / 1000).toFixed(1)} s; reconnected, sessions released as stale: ${stale === null ? 'no' : 'yes'}`,
        );
        // The slot goes back to a direct connection for what follows.
        await cluster.terminate(worker);
        cut = null;
        await cluster.startWorker(slot);
      }
    } finally {
      await proxy.close();
      if (cut !== null && cut.state !== 'dead') {
        await cluster.terminate(cut);
        await cluster.startWorker(cut.slot);
      }
    }
    notes.did.push(
      `${rounds} round(s): a worker restarted behind a TCP proxy to Redis, 6 sessions whose agents run a timestamped tool for 6-9 s, the proxy closed while it drove some of them, reopened once they completed elsewhere`,
    );
    notes.found.push(
      ...found,
      `${pairs} pair(s) of consecutive tool runs of one session; ${pairs === 0 ? 'no gap measured' : worstGapMs > 0 ? `worst overlap 0 ms (the closest: the next tool began ${worstGapMs} ms after the previous one ended)` : `worst overlap ${-worstGapMs} ms`}`,
    );
    notes.checks.push(
      check(
        "a cut-off worker's agents stop before another worker's start (tool lifetimes never overlap)",
        overlaps,
        `${pairs} consecutive pair(s)`,
      ),
    );
    notes.checks.push(
      check(
        'a reconnected worker writes nothing, releases the lost sessions as stale',
        violations,
        `${rounds} round(s)`,
      ),
    );
  },
};
