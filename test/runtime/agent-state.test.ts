import { readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { FakeModelServer } from '../support/fake-model-server.ts';
import type { PiEnv } from '../support/pi-env.ts';
import { piHostOptions, turnEnded, type Harness, type RuntimeSuite, useRuntimeSuite } from '../support/runtime.ts';
import { internals } from '../../src/runtime/internals.ts';

/**
 * pi keeps its conversation in a local session file. Turn 2 may run on another host than turn 1:
 * the runtime stores the file with the session in Redis after each attempt and puts it back on
 * whichever worker runs the next one, so `session.resumed` works across hosts. Two workers with
 * different local session (and state) directories stand for two hosts.
 */

let server: FakeModelServer;
let env: PiEnv;
let h: Harness;
let tempDir: RuntimeSuite['tempDir'];

useRuntimeSuite('agent-state', {}, (s) => {
  ({ server, env, h, tempDir } = s);
});

const TURN_1 = 'Remember the word PELICAN-42 for me.';
const TURN_2 = 'Which word did I ask you to remember?';

describe('agent state travels with the session', () => {
  it('turn 2 on another host resumes the pi session of turn 1, with turn 1 in the model’s context', async () => {
    const [sessionsA, sessionsB] = [tempDir('host-a-sessions'), tempDir('host-b-sessions')];
    const hostA = await h.startWorker({ agentOptions: { pi: piHostOptions(env, tempDir('host-a-state'), sessionsA) } });
    const { sessionId } = await h.runtime.enqueue({
      prompt: TURN_1,
      options: { provider: 'fake', model: 'text', cwd: env.cwd },
    });
    expect((await turnEnded(h.runtime, sessionId, 1)).state).toBe('completed');
    const turn1 = await h.runtime.readMessages(sessionId);
    const started = turn1.find((m) => m.type === 'session.started');
    const piSessionId = (started?.content as { sessionId?: string } | undefined)?.sessionId;
    expect(piSessionId).toMatch(/^[0-9a-f-]{8,}$/);
    expect(readdirSync(sessionsA).filter((n) => n.endsWith(`_${piSessionId}.jsonl`))).toHaveLength(1);
    // The file is in Redis with the session, not only on host A.
    expect(await internals(h.runtime).store.agentState(sessionId, `pi:${piSessionId}`)).toContain(TURN_1);

    // Host A goes away; host B has never seen this session.
    await hostA.close(2000);
    expect(readdirSync(sessionsB)).toEqual([]);
    const hostB = await h.startWorker({ agentOptions: { pi: piHostOptions(env, tempDir('host-b-state'), sessionsB) } });
    server.reset();
    await h.runtime.enqueue({ sessionId, prompt: TURN_2 });
    const session = await turnEnded(h.runtime, sessionId, 2);
    expect(session.state).toBe('completed');
    expect(session.context?.agentSessionId).toBe(piSessionId);

    const turn2 = (await h.runtime.readMessages(sessionId)).filter((m) => m.turn === 2);
    expect(turn2[0]).toMatchObject({ type: 'session.resumed', content: { sessionId: piSessionId } });
    expect(turn2.at(-1)?.type).toBe('terminal.completed');
    // Turn 2 ran on B, and the model saw turn 1's exchange.
    const [request] = server.requests;
    expect(server.requests).toHaveLength(1);
    const sent = JSON.stringify(request?.body.messages ?? []);
    expect(sent).toContain(TURN_1);
    expect(sent).toContain(TURN_2);
    expect(readdirSync(sessionsB).filter((n) => n.endsWith(`_${piSessionId}.jsonl`))).toHaveLength(1);
    expect(hostB.activeSessions).toEqual([]);
    // Turn 2's exchange went back to Redis too, for the next host.
    expect(await internals(h.runtime).store.agentState(sessionId, `pi:${piSessionId}`)).toContain(TURN_2);
  });
});
