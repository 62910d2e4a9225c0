/**
 * Scenario 4: concurrent prompts and cancels racing on the same sessions, from several clients
 * (each its own Runtime with its own Redis connections, as separate processes would be): bursts of
 * prompts to one session at once, cancels landing before, during and after turns, several clients
 * creating the same new session at the same instant. Every prompt must run as its own turn, in the
 * order `enqueue` numbered it; no cancel may stay pending; and once the dust settles, a new prompt
 * on every session must complete (no stale cancel waiting for it).
 */
import { TEST_POLICY } from '../../test/support/runtime.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import { checkSettled } from '../checks.ts';
import type { Ledger } from '../ledger.ts';
import { sleep, type ScenarioContext, type ScenarioDefinition, type ScenarioNotes } from '../scenario.ts';

export const races: ScenarioDefinition = {
  name: 'races',
  title: 'concurrent prompts and cancels racing on the same sessions',
  settleMs: 60_000,
  async run(ctx: ScenarioContext, ledger: Ledger, notes: ScenarioNotes) {
    const { cluster, random } = ctx;
    const clients = [
      cluster.runtime,
      ...[1, 2].map(() => new Runtime({ connect: cluster.connect, prefix: cluster.prefix, policy: TEST_POLICY })),
    ];
    const durationMs = ctx.quick ? 6_000 : 15_000;
    const sessionIds = Array.from({ length: ctx.quick ? 3 : 6 }, () => ledger.newSessionId());
    let prompts = 0;
    let cancels = 0;
    let bursts = 0;
    const most = ctx.quick ? 300 : 900;
    const behaviour = (): string =>
      random.pick([
        'ok:50',
        `ok:${random.int(100, most)}`,
        `ok:${random.int(100, most)}`,
        `tool:${most / 2}`,
        `ignore-sigint:${most / 2}`,
        'fail:server_error@1',
      ]);
    const policy = { maxAttempts: 3, initialDelayMs: 100, multiplier: 1, maxDelayMs: 100, jitter: 'none' };
    try {
      // Several clients create the same new session at the same instant.
      const fresh = ledger.newSessionId();
      await Promise.all(
        clients.map((client) =>
          ledger.enqueue(client, { sessionId: fresh, behaviour: behaviour(), retryPolicy: policy }),
        ),
      );
      prompts += clients.length;
      const deadline = Date.now() + durationMs;
      await Promise.all(
        clients.map(async (client, c) => {
          while (Date.now() < deadline) {
            const sessionId = random.pick(sessionIds);
            const roll = random.next();
            if (roll < 0.15) {
              // A burst: several prompts to one session at once, a cancel in the middle of them.
              bursts += 1;
              const n = random.int(3, 6);
              await Promise.all(
                Array.from({ length: n }, async (_, i) => {
                  if (i === Math.floor(n / 2)) {
                    cancels += 1;
                    await ledger.cancel(client, sessionId, `chaos: burst cancel by client ${c}`).catch(() => undefined);
                  }
                  await ledger.enqueue(client, { sessionId, behaviour: behaviour(), retryPolicy: policy });
                  prompts += 1;
                }),
              );
            } else if (roll < 0.45) {
              cancels += 1;
              // A cancel of a session not created yet is refused (NotFoundError): that is fine.
              await ledger.cancel(client, sessionId, `chaos: cancel by client ${c}`).catch(() => undefined);
            } else {
              await ledger.enqueue(client, { sessionId, behaviour: behaviour(), retryPolicy: policy });
              prompts += 1;
            }
            await sleep(ctx.quick ? random.int(50, 400) : random.int(0, 250));
          }
        }),
      );
      notes.did.push(
        `${clients.length} clients for ${durationMs / 1000} s on ${sessionIds.length} sessions (+1 created by all at once): ${prompts} prompts (${bursts} bursts of 3-6 at once), ${cancels} cancels`,
      );

      // Once every race has played out: a new prompt per session must simply complete.
      const settled = await checkSettled(cluster.runtime, ledger, 60_000);
      if (!settled.ok) {
        notes.checks.push({ ...settled, name: 'the races settle' });
        return;
      }
      const finals = [...ledger.ids()];
      for (const sessionId of finals)
        await ledger.enqueue(cluster.runtime, {
          sessionId,
          behaviour: 'ok:100',
          expect: 'completed',
          retryPolicy: policy,
        });
      notes.did.push(
        `then one more prompt on each of the ${finals.length} sessions, expected to complete (no cancel left behind to hit it)`,
      );
      notes.found.push(`every race settled in ${(settled.waitedMs / 1000).toFixed(1)} s, with no cancel left pending`);
    } finally {
      await Promise.all(clients.slice(1).map((c) => c.close()));
    }
  },
};
