import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import type { WorkspaceConfig, Workspaces } from '../../src/workspace/index.ts';
import { POINTER_FIELD, parsePointer } from '../../src/runtime/session-loop/workspace-attempt.ts';
import { parseTurns, TURNS_FIELD } from '../../src/runtime/workspace-turns.ts';
import { internals } from '../../src/runtime/internals.ts';
import type { ScriptFn } from '../support/fake-model-server.ts';
import { runModel } from '../support/workspace-model.ts';
import { piHostOptions, turnEnded, until, useRuntimeSuite, type Harness } from '../support/runtime.ts';
import { workspacesIn } from '../workspace/support.ts';

/**
 * A cancel racing a completing turn, with workspaces (docs/workspaces.md "A cancel racing a completed end"): real
 * pi, real git, real Redis, one in-process worker. The worker's workspaces are the real ones, with a gate: once armed
 * for a session, the attempt's completed end is held just after its files are taken (the `settle` or end `snapshot`
 * of AttemptWorkspace.completed), before the machine hears of the end. The test cancels while it is held and opens
 * the gate once the machine has taken the cancel: no timing decides who wins.
 */

const gate = vi.hoisted(() => ({
  /** The session whose next completed end is held (null: none). */
  armed: null as string | null,
  reached: null as (() => void) | null,
  open: null as Promise<void> | null,
}));

vi.mock(import('../../src/workspace/index.ts'), async (importOriginal) => {
  const real = await importOriginal();
  /** Holds the call just after the real one, when it takes the armed session's completed end. */
  const hold = async (sessionId: string, end: boolean): Promise<void> => {
    if (!end || gate.armed !== sessionId) return;
    gate.armed = null;
    gate.reached?.();
    await gate.open;
  };
  const gated = (inner: Workspaces): Workspaces => ({
    path: (id) => inner.path(id),
    prepare: (id, snapshot, source) => inner.prepare(id, snapshot, source),
    snapshot: async (id, label, parent, options) => {
      const taken = await inner.snapshot(id, label, parent, options);
      await hold(id, label.endsWith(' end'));
      return taken;
    },
    settle: async (id, snapshotId) => {
      const settled = await inner.settle(id, snapshotId);
      await hold(id, true);
      return settled;
    },
    restore: (id, snapshotId) => inner.restore(id, snapshotId),
    diff: (id, from, to, options) => inner.diff(id, from, to, options),
    copy: (from, snapshotId, to) => inner.copy(from, snapshotId, to),
    remove: (id) => inner.remove(id),
    bundle: (id, snapshotId) => inner.bundle(id, snapshotId),
    unbundle: (id, bundle) => inner.unbundle(id, bundle),
    compact: (graceMs, exists) => inner.compact(graceMs, exists),
  });
  return { ...real, createWorkspaces: (config: WorkspaceConfig) => gated(real.createWorkspaces(config)) };
});

const MODEL = 'ws-race';
/** The racing turn's answer: in its conversation only if its completed end was recorded. */
const ANSWER = 'race-answer-of-turn-2';

/** runModel, but the racing turn's text answer names itself. */
const raceModel = (): ScriptFn => {
  const base = runModel();
  return (context) => {
    const messages = context.body.messages ?? [];
    const last = messages.at(-1);
    const prompt = JSON.stringify(messages.findLast((m) => m.role === 'user')?.content ?? '');
    if (last?.role === 'tool' && prompt.includes('# race')) return { text: ANSWER, chunkDelayMs: 0 };
    return base(context);
  };
};

let h: Harness;
let config: WorkspaceConfig;
let requests: () => Array<{ body: { messages?: unknown[] } }>;

async function agentHash(sessionId: string): Promise<Record<string, string>> {
  return h.connect('t').hgetall(internals(h.runtime).keys.session(sessionId, 'agent'));
}

describe('a cancel racing a completing turn (workspaces)', () => {
  useRuntimeSuite('workspaces-cancel-race', { scripts: { [MODEL]: raceModel() } }, async (s) => {
    ({ h } = s);
    requests = () => s.server.requestsFor(MODEL);
    config = workspacesIn(s.tempDir('ws-race'));
    await h.startWorker({ workspaces: config, agentOptions: { pi: piHostOptions(s.env, h.stateDir) } });
  });

  const stops = [
    {
      name: 'a cancel',
      tag: 'cancel',
      state: 'cancelled',
      end: 'terminal.cancelled',
      stop: (sessionId: string) => h.runtime.cancel(sessionId, 'test'),
      after: async () => undefined,
    },
    {
      name: 'the turn’s wall-clock limit',
      tag: 'limit',
      state: 'failed',
      end: 'terminal.failed',
      // A limit the running turn is already past: the machine stops the attempt at once (a new limit applies at once).
      stop: (sessionId: string) => h.runtime.setPolicy({ maxTurnMs: 1 }, sessionId),
      after: (sessionId: string) => h.runtime.resetPolicy(sessionId),
    },
  ] as const;

  it.each(stops)(
    '$name taken while the completed end is being recorded wins: log, files and conversation agree',
    async ({ tag, state, end, stop, after }) => {
      const { sessionId } = await h.runtime.enqueue({
        prompt: 'RUN: echo one > a.txt',
        options: { provider: 'fake', model: MODEL },
      });
      expect((await turnEnded(h.runtime, sessionId, 1)).state).toBe('completed');
      const path = join(config.root, sessionId);

      let release: () => void = () => undefined;
      gate.open = new Promise<void>((resolve) => (release = resolve));
      const reached = new Promise<void>((resolve) => (gate.reached = resolve));
      gate.armed = sessionId;
      await h.runtime.enqueue({ sessionId, prompt: `RUN: echo two > b.txt # race ${tag}` });
      // The agent has answered and ended; its completed end's files are taken, and the attempt is held there.
      await reached;
      await stop(sessionId);
      // The machine has stopped the attempt (its signal is aborted) before the attempt goes on.
      await until(
        async () => (await h.runtime.getSession(sessionId))?.state === 'cancelling',
        30_000,
        'the machine to stop the attempt',
      );
      release();

      expect((await turnEnded(h.runtime, sessionId, 2)).state).toBe(state);
      await after(sessionId);
      // The log: the attempt ended once, as the machine says; the agent's own completed end is not stored.
      const turn2 = (await h.runtime.readMessages(sessionId)).filter((m) => m.turn === 2);
      expect(turn2.filter((m) => m.type.startsWith('terminal.')).map((m) => m.type)).toEqual([end]);
      expect(turn2.map((m) => m.type)).toContain('tool.completed');
      // Recorded: the tool batch (its file and its result), not the completed end (the answer, the turn's point).
      const agent = await agentHash(sessionId);
      expect(parsePointer(agent[POINTER_FIELD] ?? null)?.label).toMatch(/^turn 2 tool /);
      expect(parseTurns(agent[TURNS_FIELD] ?? null).map((p) => p.turn)).toEqual([0, 1]);
      for (const [field, value] of Object.entries(agent))
        expect([field, value.includes(ANSWER)]).toEqual([field, false]);
      // The copy holds exactly what the recorded conversation's tool results produced.
      expect(readdirSync(path).sort()).toEqual(['.git', 'a.txt', 'b.txt']);
      expect(readFileSync(join(path, 'b.txt'), 'utf8')).toBe('two\n');

      // The next turn's conversation is the recorded one: the tool's result, not the answer the stop took back.
      await h.runtime.enqueue({ sessionId, prompt: `RUN: cat b.txt > c.txt # after-race ${tag}` });
      expect((await turnEnded(h.runtime, sessionId, 3)).state).toBe('completed');
      expect(readFileSync(join(path, 'c.txt'), 'utf8')).toBe('two\n');
      const next = requests().filter((r) => JSON.stringify(r.body.messages ?? []).includes(`after-race ${tag}`));
      expect(next.length).toBeGreaterThan(0);
      for (const r of next) {
        const json = JSON.stringify(r.body.messages);
        expect(json).toContain('echo two > b.txt');
        expect(json).not.toContain(ANSWER);
      }
      expect(parseTurns((await agentHash(sessionId))[TURNS_FIELD] ?? null).map((p) => p.turn)).toEqual([0, 1, 3]);
    },
    120_000,
  );
});
