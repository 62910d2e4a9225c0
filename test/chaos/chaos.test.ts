import { describe, expect, it } from 'vitest';
import { scanRunProcessesSync } from '../../chaos/cluster.ts';
import { runChaos, SCENARIOS } from '../../chaos/run.ts';

/**
 * `npm run chaos -- --quick` inside `npm test`: every scenario, shortened (8 kill -9 cycles, one
 * Redis restart and two pauses, the main misbehaving agents, 6 s of racing clients, one frozen
 * worker), against real worker processes, a real redis-server and real pi. Every check must pass.
 */
describe('chaos (quick)', () => {
  it('every scenario passes every check, and nothing it started is left running', { timeout: 360_000 }, async () => {
    const lines: string[] = [];
    const report = await runChaos({ quick: true, seed: 20_261_129, log: (line) => lines.push(line) });
    const failed = report.scenarios.flatMap((s) =>
      s.checks.filter((c) => !c.ok).map((c) => `${s.name}: ${c.name}\n  ${c.violations.join('\n  ')}`),
    );
    expect(failed, `${lines.join('\n')}\n\n${report.summary}`).toEqual([]);
    // Every scenario but the full-only ones (the Redis Cluster failover pair).
    expect(report.scenarios.map((s) => s.name)).toEqual(
      SCENARIOS.filter((s) => s.fullOnly !== true).map((s) => s.name),
    );
    expect(report.ok).toBe(true);
    // Everything it started is gone: no process of the run is left (workers, agents, tools).
    expect(scanRunProcessesSync(report.runId)).toEqual([]);
  });
});
