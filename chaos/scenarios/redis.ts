/**
 * Scenario 2: Redis itself fails mid-run: restarted (SIGTERM, AOF with fsync always), paused with
 * SIGSTOP shorter than the lease TTL (everything waits, nothing is lost), paused longer than the
 * lease TTL (every lease and BullMQ lock runs out while the workers cannot see it: every holder
 * must find out, stop its agent and let the session be taken again), and (full run) killed with
 * SIGKILL and restarted from its AOF while an enqueue is in flight. Every prompt must complete.
 */
import { assistantText } from '../../test/support/runtime.ts';
import { PI_SLOW_MODEL } from '../cluster.ts';
import type { Ledger } from '../ledger.ts';
import {
  check,
  sleep,
  waitFor,
  type ScenarioContext,
  type ScenarioDefinition,
  type ScenarioNotes,
} from '../scenario.ts';

const POLICY = { maxAttempts: 100, initialDelayMs: 200, multiplier: 1.5, maxDelayMs: 1000, jitter: 'none' };
const PARK_POLICY = { maxAttempts: 100, initialDelayMs: 3000, multiplier: 1, maxDelayMs: 3000, jitter: 'none' };

export const redisFaults: ScenarioDefinition = {
  name: 'redis',
  title: 'Redis restarted (AOF on), paused (SIGSTOP/SIGCONT) shorter and longer than the lease, killed',
  settleMs: 90_000,
  async run(ctx: ScenarioContext, ledger: Ledger, notes: ScenarioNotes) {
    const { cluster, random } = ctx;
    const runtime = cluster.runtime;
    const piOptions = { provider: 'fake', model: PI_SLOW_MODEL, cwd: cluster.pi.cwd };
    const long = Array.from({ length: ctx.quick ? 3 : 6 }, () => ledger.newSessionId());
    const [shortest, longest] = ctx.quick ? [3000, 4500] : [4000, 7000];
    const enqueueLong = (sessionId: string) =>
      ledger.enqueue(runtime, {
        sessionId,
        behaviour: `ok:${random.int(shortest, longest)}`,
        expect: 'completed',
        retryPolicy: POLICY,
      });
    await Promise.all(long.map(enqueueLong));
    const others = [
      ledger.enqueue(
        runtime,
        { behaviour: 'Count to eighteen', pi: true, expect: 'completed', retryPolicy: POLICY },
        piOptions,
      ),
      ledger.enqueue(runtime, { behaviour: 'fail:server_error@1', expect: 'completed', retryPolicy: PARK_POLICY }),
      ledger.enqueue(runtime, { behaviour: 'tool:4000', expect: 'completed', retryPolicy: POLICY }),
    ];
    if (!ctx.quick)
      others.push(
        ledger.enqueue(
          runtime,
          { behaviour: 'Count to eighteen', pi: true, expect: 'completed', retryPolicy: POLICY },
          piOptions,
        ),
        ledger.enqueue(runtime, { behaviour: 'fail:server_error@1', expect: 'completed', retryPolicy: PARK_POLICY }),
      );
    await Promise.all(others);
    const midStream = await waitFor(async () => {
      const logs = await Promise.all(long.map((id) => runtime.readMessages(id)));
      return logs.filter((log) => assistantText(log).length > 0).length >= Math.ceil(long.length / 2);
    }, 30_000);
    if (midStream === null) notes.found.push('(the sessions were slow to start; the faults landed anyway)');
    const events: string[] = [];
    const timed = async (what: string, fn: () => Promise<void>): Promise<void> => {
      const at = Date.now();
      await fn();
      events.push(`${what} (${Date.now() - at} ms)`);
    };

    await timed('restart (SIGTERM, AOF)', () => cluster.redis.restart());
    await sleep(1500);
    // New prompts while the workers reconnect.
    await Promise.all(long.slice(0, 2).map(enqueueLong));
    await sleep(1000);
    await timed('SIGSTOP for 1 s (< lease TTL)', async () => {
      cluster.redis.pause();
      await sleep(1000);
      cluster.redis.resume();
    });
    await sleep(ctx.quick ? 1500 : 2500);
    await Promise.all(long.slice(2, 4).map(enqueueLong));
    await sleep(1000);
    // Longer than the lease TTL (2 s) and the BullMQ lock: every holder loses its sessions.
    await timed('SIGSTOP for 5 s (> lease TTL)', async () => {
      cluster.redis.pause();
      await sleep(5000);
      cluster.redis.resume();
    });
    if (!ctx.quick) {
      await sleep(3000);
      await timed('SIGKILL + restart from the AOF, an enqueue in flight', async () => {
        await cluster.redis.kill();
        const inFlight = enqueueLong(long[0] ?? ledger.newSessionId());
        await sleep(300);
        await cluster.redis.restart();
        await inFlight;
      });
    }
    notes.did.push(
      `${ledger.sessions.size} sessions (${long.length} streaming ${shortest / 1000}-${longest / 1000} s, real pi, parked backoff, a tool) and ${ledger.promptCount()} prompts; Redis: ${events.join('; ')}`,
    );

    // Every attempt Redis took away is on record, as interrupted, and was retried.
    await waitFor(
      async () => {
        const views = await Promise.all(ledger.ids().map((id) => runtime.getSession(id)));
        return views.every(
          (v) =>
            v?.context?.turn?.status === 'completed' && v.queued.length === 0 && (v.context.mailbox.length ?? 0) === 0,
        )
          ? true
          : null;
      },
      90_000,
      250,
    );
    const views = await Promise.all(ledger.ids().map((id) => runtime.getSession(id)));
    const interrupted = views.reduce(
      (n, v) => n + (v?.context?.turn?.attempts.filter((a) => a.outcome === 'interrupted').length ?? 0),
      0,
    );
    notes.found.push(
      `${interrupted} attempt(s) of the last turns were recorded interrupted and retried; every session's workers reconnected by themselves`,
    );
    notes.checks.push(
      check('Redis faults injected', events.length >= 3 ? [] : ['not every fault was injected'], events.join('; ')),
    );
  },
};
