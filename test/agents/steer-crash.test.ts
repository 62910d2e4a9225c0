import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { deploymentPolicy } from '../../src/runtime/deployment-policy.ts';
import { internals } from '../../src/runtime/internals.ts';
import { markerScope, reapOrphans } from '../../src/runtime/orphans.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import type { StoredMessage } from '../../src/runtime/store/session-store.ts';
import { claudeBin, FAKE_ANTHROPIC_KEY } from '../support/claude-code-env.ts';
import { hasToolResult, startFakeAnthropicServer, type FakeAnthropicServer } from '../support/fake-anthropic-server.ts';
import type { PiEnv } from '../support/pi-env.ts';
import { assistantText, expectWholeLog, turnEnded, until, useRuntimeSuite, type Harness } from '../support/runtime.ts';
import {
  killAllWorkerProcesses,
  startWorkerProcess,
  type WorkerProcessOptions,
  workspaceHost,
} from '../support/worker-process.ts';

/**
 * A steer through the fallback (issue 29) is delivered exactly once whatever the point where its worker is
 * `kill -9`ed: the real Claude Code (no native channel sessiond uses) against its fake model API, in a workspace
 * session, through `sessiond worker` processes on one host (the next worker finds the agent's own files there
 * further along than what was recorded). The model decides from what it is sent; a request carrying the steer
 * hangs while the test says so: the kill comes while the restarted run waits for the model, before anything
 * records the conversation that holds the steer.
 */

const MODEL = 'steer-crash';
const gates = join(tmpdir(), `sessiond-steer-crash-gates-${process.pid}`);
let gateCount = 0;
const newGate = (): string => `gate-${++gateCount}`;
const openGate = (gate: string): void => writeFileSync(join(gates, gate), '');
/** A shell command that waits for the gate file (node: Claude Code refuses a bare sleep). */
const waitFor = (gate: string): string =>
  `node -e "setInterval(() => { if (require('fs').existsSync('${join(gates, gate)}')) process.exit(0); }, 100)"`;

/** While true, a request carrying a steer is never answered (the restarted run waits for the model). */
let holdSteered = true;
/**
 * Null: a request carrying a steer is answered with a text. Else the steer is followed by a quick tool (its result,
 * QUICK-DONE, recorded with the conversation that holds the steer), then one waiting for this gate (GATE-OPENED).
 */
let afterSteer: string | null = null;
const bash = (command: string) => ({ toolUses: [{ name: 'Bash', input: { command, description: 'Run' } }] });

let h: Harness;
let env: PiEnv;
let runtime: Runtime;
let anthropic: FakeAnthropicServer;
let host: WorkerProcessOptions;

const steered = (log: StoredMessage[]) => log.filter((m) => m.type === 'prompt.steered');
const count = (text: string, part: string): number => text.split(part).length - 1;
/** The bodies (messages as JSON) of the requests this test's model got, in order. */
const requests = (): string[] => anthropic.requestsFor(MODEL).map((r) => JSON.stringify(r.body.messages));

useRuntimeSuite(
  'steer-crash',
  {
    cleanup: async () => {
      await killAllWorkerProcesses();
      if (h !== undefined) await reapOrphans(markerScope(internals(h.runtime).keys.prefix));
    },
  },
  async (s) => {
    if (!existsSync(claudeBin)) throw new Error(`${claudeBin} not found: run scripts/install-agent-clis.sh`);
    ({ h, env } = s);
    mkdirSync(gates, { recursive: true });
    anthropic = await startFakeAnthropicServer();
    anthropic.setScript(MODEL, ({ body }) => {
      const json = JSON.stringify(body.messages);
      const steers = json.match(/STEER-\d+/g);
      if (steers !== null) {
        if (holdSteered) return { hang: true };
        // (Split in each command: only its output has the word.)
        if (afterSteer !== null && !json.includes('QUICK-DONE')) return bash(`printf 'QUICK-%s' DONE`);
        if (afterSteer !== null && !json.includes('GATE-OPENED'))
          return bash(`${waitFor(afterSteer)}; printf 'GATE-%s' OPENED`);
        return { text: `Steered: ${[...new Set(steers)].join(' ')}.` };
      }
      const gate = /gate-\d+/.exec(json)?.[0];
      if (gate === undefined || hasToolResult(body)) return { text: 'The wait is over.' };
      return bash(waitFor(gate));
    });
    const dir = s.tempDir('host');
    const base = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: join(dir, 'home'),
      LANG: 'C.UTF-8',
      TMPDIR: tmpdir(),
    };
    mkdirSync(base.HOME, { recursive: true });
    const agents = {
      'claude-code': {
        command: claudeBin,
        configDir: join(dir, 'claude-config'),
        tmpDir: join(dir, 'claude-tmp'),
        allowedTools: ['Bash'],
        env: { ...base, ANTHROPIC_BASE_URL: anthropic.url, ANTHROPIC_API_KEY: FAKE_ANTHROPIC_KEY },
      },
    };
    host = workspaceHost({
      redisUrl: s.redis.url,
      prefix: h.prefix,
      env,
      dir,
      store: join(s.tempDir('store'), 'store.git'),
      agents,
    });
    runtime = new Runtime({
      connect: s.h.connect,
      prefix: s.h.prefix,
      policy: deploymentPolicy({ workspace: tmpdir(), agents }),
    });
  },
);
afterEach(() => killAllWorkerProcesses());
afterAll(async () => {
  await runtime?.close();
  await anthropic?.close();
});

/** A turn whose tool waits for its gate, a steer accepted meanwhile, the gate opened: the fallback restarts the agent. */
async function steerAtToolBoundary(): Promise<{ sessionId: string; promptId: string; steer: string }> {
  const gate = newGate();
  const { sessionId } = await runtime.enqueue({
    prompt: `Wait for ${gate}`,
    options: { agent: 'claude-code', model: MODEL },
    retryPolicy: { initialDelayMs: 200, jitter: 'none' },
  });
  await until(
    async () => (await runtime.readMessages(sessionId)).some((m) => m.type === 'tool.call'),
    120_000,
    'the tool to run',
  );
  const steer = `STEER-${gateCount}`;
  const accepted = await runtime.enqueue({ sessionId, prompt: steer, whenBusy: 'steer' });
  expect(accepted.steered).toBe(true);
  openGate(gate);
  return { sessionId, promptId: accepted.promptId, steer };
}

describe('a fallback steer and a kill -9 of its worker (Claude Code, workspace)', () => {
  it('killed after the restart began, before the agent state holding the steer was recorded: the next worker delivers it once', async () => {
    holdSteered = true;
    afterSteer = null;
    const first = await startWorkerProcess(host);
    const { sessionId, promptId, steer } = await steerAtToolBoundary();
    // The restarted run is under way (its first message is in the log) and waits for the model with the steer.
    await until(
      async () =>
        requests().some((json) => json.includes(steer)) &&
        (await runtime.readMessages(sessionId)).some((m) => m.type === 'session.resumed'),
      120_000,
      'the restarted run to ask the model with the steer',
    );
    first.kill('SIGKILL');
    expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });
    const before = requests().length;
    // Nothing recorded the conversation with the steer: it is still pending.
    expect((await runtime.getSession(sessionId))?.steers.map((s) => s.id)).toEqual([promptId]);
    holdSteered = false;

    const second = await startWorkerProcess(host);
    const session = await turnEnded(runtime, sessionId, 1, 180_000);
    expect(session.state).toBe('completed');
    expect(session.context?.turnIndex).toBe(1);
    expect(session.steers).toEqual([]);
    // The requests of the next worker's attempt: the steer in each, once; the last answered it.
    const after = requests().slice(before);
    expect(after.length).toBeGreaterThan(0);
    expect(after.map((json) => count(json, steer))).toEqual(after.map(() => 1));
    const log = await runtime.readMessages(sessionId);
    expectWholeLog(log);
    expect(assistantText(log.filter((m) => m.attempt === 2))).toBe(`Steered: ${steer}.`);
    // Recorded delivered once, by that attempt (the first one's ended interrupted).
    expect(steered(log).map((m) => [m.turn, m.attempt, m.content])).toEqual([
      [1, 2, { promptId, via: 'restart', at: expect.any(Number) }],
    ]);
    second.kill('SIGTERM');
    await second.exited;
  }, 600_000);

  it('killed after the agent state holding the steer was recorded: the next worker does not send it again', async () => {
    holdSteered = false;
    const gate = newGate();
    // After the steer, one quick tool (its result recorded with the conversation that holds the steer), then one
    // that waits for a gate the test opens only once the worker is dead.
    afterSteer = gate;
    const first = await startWorkerProcess(host);
    const { sessionId, promptId, steer } = await steerAtToolBoundary();
    await until(
      async () => steered(await runtime.readMessages(sessionId)).length > 0,
      120_000,
      'the steer to be recorded delivered',
    );
    first.kill('SIGKILL');
    expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });
    const before = requests().length;
    expect((await runtime.getSession(sessionId))?.steers).toEqual([]);
    openGate(gate);

    const second = await startWorkerProcess(host);
    const session = await turnEnded(runtime, sessionId, 1, 180_000);
    expect(session.state).toBe('completed');
    expect(session.context?.turnIndex).toBe(1);
    const log = await runtime.readMessages(sessionId);
    expectWholeLog(log);
    expect(steered(log).map((m) => [m.turn, m.attempt, m.content])).toEqual([
      [1, 1, { promptId, via: 'restart', at: expect.any(Number) }],
    ]);
    const after = requests().slice(before);
    expect(after.length).toBeGreaterThan(0);
    expect(after.map((json) => count(json, steer))).toEqual(after.map(() => 1));
    second.kill('SIGTERM');
    await second.exited;
  }, 600_000);
});
