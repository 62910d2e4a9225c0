/**
 * A witness of who drives which session, sampled a few times a second while a scenario runs:
 * - the lease of every session of the scenario (`<workerId>#<fence>`): a session's fence must
 *   never go backwards (a lease handed back to an older holder would mean two drivers);
 * - the agent processes of the run (found in /proc by CHAOS_RUN_ID, grouped by their
 *   SESSIOND_AGENT_MARKER), with the worker that started them and their session, which the
 *   marker names (`sessiond.<scope>.<worker pid>.<start time>.<uuid>.<session id>`).
 *
 * An agent whose worker is alive and running but no longer holds the session's lease (a stale
 * holder, or one that just finished) must be gone within STALE_GRACE_MS: that is how long the
 * holder has to notice (a renewal every ttl/3) and stop its agent (interrupt, 2 s, SIGKILL, 5 s).
 * Two agents of one session under two different running workers, past that grace, are two
 * workers driving one session. An agent whose worker is dead (kill -9) is an orphan: the next
 * worker that starts on the host must reap it, within ORPHAN_GRACE_MS. Marked processes whose
 * agent itself is gone (e.g. a tool grandchild left behind by an agent that ended), or whose
 * marker names no worker of the run, are strays, allowed for STRAY_GRACE_MS. A frozen worker
 * (SIGSTOP) drives nothing: its agents are not judged until it runs.
 */
import type { Cluster, ScannedProcess } from './cluster.ts';
import { internals } from '../src/runtime/internals.ts';

export const STALE_GRACE_MS = 12_000;
export const ORPHAN_GRACE_MS = 20_000;
export const STRAY_GRACE_MS = 12_000;
export const SAMPLE_EVERY_MS = 200;

export interface WitnessReport {
  samples: number;
  /** Lease takeovers seen (a session's holder changed from one worker to another). */
  takeovers: number;
  maxAgents: number;
  orphansSeen: number;
  staleAgentsSeen: number;
  /** How long stale agents lived after their worker could run again (ms), max. */
  maxStaleStopMs: number;
  maxOrphanLifeMs: number;
  /** Evidence of two drivers: fences going backwards, a stale holder's agents past their grace, two workers' agents for one session. */
  driverViolations: string[];
  /** Agents nobody should be running: a dead worker's left unreaped, or owned by nothing of the run. */
  processViolations: string[];
}

interface Tracked {
  /** When it was first seen in its current suspicious condition (stale / orphan / stray), else null. */
  suspectSince: number | null;
  condition: 'ok' | 'stale' | 'orphan' | 'stray' | 'frozen';
  sessionId: string | null;
  reported: boolean;
}

export class Witness {
  readonly #cluster: Cluster;
  readonly #sessions: () => readonly string[];
  readonly #fences = new Map<string, { fence: number; holder: string }>();
  readonly #agents = new Map<string, Tracked>();
  readonly report: WitnessReport = {
    samples: 0,
    takeovers: 0,
    maxAgents: 0,
    orphansSeen: 0,
    staleAgentsSeen: 0,
    maxStaleStopMs: 0,
    maxOrphanLifeMs: 0,
    driverViolations: [],
    processViolations: [],
  };
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<void> | null = null;
  #stopped = false;

  constructor(cluster: Cluster, sessions: () => readonly string[]) {
    this.#cluster = cluster;
    this.#sessions = sessions;
  }

  start(): void {
    const tick = (): void => {
      if (this.#stopped) return;
      this.#running = this.sample()
        .catch((error: Error) => {
          this.#violation('driver', `witness: sampling failed: ${error.message}`);
        })
        .finally(() => {
          if (!this.#stopped) this.#timer = setTimeout(tick, SAMPLE_EVERY_MS);
        });
    };
    tick();
  }

  async stop(): Promise<WitnessReport> {
    this.#stopped = true;
    if (this.#timer !== null) clearTimeout(this.#timer);
    await this.#running;
    return this.report;
  }

  #violation(kind: 'driver' | 'process', text: string): void {
    const list = kind === 'driver' ? this.report.driverViolations : this.report.processViolations;
    if (!list.includes(text)) list.push(text);
  }

  async sample(): Promise<void> {
    const cluster = this.#cluster;
    const sessions = [...this.#sessions()];
    const redis = internals(cluster.runtime).redis;
    // One GET per session (a Redis Cluster refuses an MGET over several slots).
    const leases = await Promise.all(
      sessions.map((id) => redis.get(internals(cluster.runtime).keys.session(id, 'lease'))),
    );
    // Read after Redis answered (which may take long: Redis paused): a process list older than the
    // leases could take an agent that just finished for a stale one.
    const now = Date.now();
    const processes = cluster.processes();
    const records = await cluster.procRecords(processes);
    this.report.samples += 1;
    const holders = new Map<string, string>();
    sessions.forEach((id, i) => {
      const token = leases[i];
      if (token === null || token === undefined) return;
      const cut = token.lastIndexOf('#');
      const holder = token.slice(0, cut);
      const fence = Number(token.slice(cut + 1));
      holders.set(id, holder);
      const seen = this.#fences.get(id);
      if (seen !== undefined) {
        if (fence < seen.fence)
          this.#violation(
            'driver',
            `${id}: the lease went back from fence ${seen.fence} (${seen.holder}) to fence ${fence} (${holder})`,
          );
        if (fence > seen.fence && holder !== seen.holder) this.report.takeovers += 1;
      }
      if (seen === undefined || fence >= seen.fence) this.#fences.set(id, { fence, holder });
    });

    const byMarker = new Map<string, ScannedProcess[]>();
    for (const p of processes) {
      if (p.marker === null) continue;
      const list = byMarker.get(p.marker) ?? [];
      list.push(p);
      byMarker.set(p.marker, list);
    }
    this.report.maxAgents = Math.max(
      this.report.maxAgents,
      [...byMarker.values()].filter((ps) => ps.some((p) => p.kind === 'agent')).length,
    );
    for (const marker of [...this.#agents.keys()]) {
      if (byMarker.has(marker)) continue;
      const gone = this.#agents.get(marker);
      this.#agents.delete(marker);
      if (gone?.condition === 'stale' && gone.suspectSince !== null)
        this.report.maxStaleStopMs = Math.max(this.report.maxStaleStopMs, now - gone.suspectSince);
      if (gone?.condition === 'orphan' && gone.suspectSince !== null)
        this.report.maxOrphanLifeMs = Math.max(this.report.maxOrphanLifeMs, now - gone.suspectSince);
    }

    // Per session: the running workers that have a live agent for it now.
    const drivers = new Map<string, Set<number>>();
    for (const [marker, procs] of byMarker) {
      const record = records.get(marker);
      const owner = record !== undefined ? cluster.allWorkers.get(record.workerPid) : undefined;
      const sessionId = record?.sessionId ?? null;
      let condition: Tracked['condition'];
      if (record === undefined || record.pid === null || owner === undefined) condition = 'stray';
      else if (owner.state === 'dead') condition = 'orphan';
      else if (owner.state === 'stopped') condition = 'frozen';
      else if (sessionId !== null && holders.get(sessionId) === owner.workerId) condition = 'ok';
      else condition = 'stale';
      const tracked = this.#agents.get(marker) ?? { suspectSince: null, condition, sessionId, reported: false };
      if (tracked.condition !== condition) {
        tracked.condition = condition;
        tracked.suspectSince = null;
      }
      if (condition === 'stale' || condition === 'orphan' || condition === 'stray') {
        if (tracked.suspectSince === null) {
          tracked.suspectSince = now;
          if (condition === 'orphan') this.report.orphansSeen += 1;
          if (condition === 'stale') this.report.staleAgentsSeen += 1;
        }
        const grace =
          condition === 'stale' ? STALE_GRACE_MS : condition === 'orphan' ? ORPHAN_GRACE_MS : STRAY_GRACE_MS;
        if (!tracked.reported && now - tracked.suspectSince > grace) {
          tracked.reported = true;
          const what = procs.map((p) => `${p.pid} ${p.kind} "${p.cmdline.slice(0, 80)}"`).join(', ');
          const who =
            condition === 'stale'
              ? `its worker ${owner?.workerId} no longer holds the lease (holder: ${sessionId === null ? '?' : (holders.get(sessionId) ?? 'none')})`
              : condition === 'orphan'
                ? `its worker ${owner?.workerId} is dead and no worker reaped it`
                : 'no live agent or worker of the run owns it';
          this.#violation(
            condition === 'stale' ? 'driver' : 'process',
            `session ${sessionId ?? '?'}: agent ${marker} alive ${Math.round((now - tracked.suspectSince) / 1000)} s after ${who}: ${what}`,
          );
        }
      }
      if (condition === 'ok' || condition === 'stale') {
        if (sessionId !== null && owner !== undefined) {
          const set = drivers.get(sessionId) ?? new Set();
          set.add(owner.pid);
          drivers.set(sessionId, set);
        }
      }
      this.#agents.set(marker, tracked);
    }
    for (const [sessionId, owners] of drivers) {
      if (owners.size < 2) continue;
      // Within the stale grace this is a holder that has not noticed yet; past it, reported above.
      const staleLong = [...this.#agents.values()].some(
        (t) =>
          t.sessionId === sessionId &&
          t.condition === 'stale' &&
          t.suspectSince !== null &&
          now - t.suspectSince > STALE_GRACE_MS,
      );
      if (staleLong)
        this.#violation(
          'driver',
          `session ${sessionId}: agents of ${owners.size} running workers (pids ${[...owners].sort().join(', ')}) at once, past the stale-holder grace`,
        );
    }
  }
}
