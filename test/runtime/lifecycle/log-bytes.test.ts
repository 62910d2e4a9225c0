import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/config.ts';
import { internals } from '../../../src/runtime/internals.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import {
  connector,
  expectWholeLog,
  sessionDump,
  TEST_POLICY,
  turnEnded,
  useRuntimeSuite,
  type Harness,
} from '../../support/runtime.ts';
import { serveApi } from '../../support/http.ts';
import type { PiEnv } from '../../support/pi-env.ts';
import type { RedisServer } from '../../support/redis.ts';

/**
 * A session's message log is capped in bytes too (`maxLogBytes`, issue 25): the turn that reaches
 * the cap ends failed with category `quota`, its agent stopped; what was stored before is intact;
 * later prompts are refused naming maxLogBytes, nothing written. Real pi, a real worker and Redis.
 */

const BYTE_CAP = 6_000;

let redis: RedisServer;
let env: PiEnv;
let h: Harness;
const extra: Array<() => Promise<void>> = [];

useRuntimeSuite(
  'log-bytes',
  {
    // Each streamed word is a message of its own: ~120 of them, far past the cap in bytes, far below any count cap.
    scripts: {
      'long-words': { text: Array.from({ length: 120 }, (_, i) => ` word-${i}-${'x'.repeat(40)}`), chunkDelayMs: 20 },
    },
    cleanup: async () => {
      for (const close of extra) await close();
    },
  },
  async (s) => {
    ({ redis, env, h } = s);
    await h.startWorker({ maxLogBytes: BYTE_CAP });
  },
);

const opts = (model: string) => ({ provider: 'fake', model, cwd: env.cwd });
const bytesOf = (messages: ReadonlyArray<{ content: unknown }>) =>
  messages.reduce((n, m) => n + Buffer.byteLength(JSON.stringify(m.content ?? null)), 0);

describe('maxLogBytes', { timeout: 120_000 }, () => {
  it('the turn that reaches it fails with category quota; the earlier turn’s messages are intact; a new prompt is refused naming maxLogBytes, nothing written', async () => {
    const { sessionId } = await h.runtime.enqueue({ prompt: 'Say hello', options: opts('text') });
    expect((await turnEnded(h.runtime, sessionId, 1, 60_000)).state).toBe('completed');
    const first = await h.runtime.readMessages(sessionId);
    expect(bytesOf(first)).toBeLessThan(BYTE_CAP);

    await h.runtime.enqueue({ sessionId, prompt: 'Talk a lot', options: opts('long-words') });
    const ended = await turnEnded(h.runtime, sessionId, 2, 60_000);
    expect(ended.state).toBe('failed');
    const attempt = ended.context?.turn?.attempts[0];
    expect(attempt).toMatchObject({ outcome: 'failed', category: 'quota' });
    expect(attempt?.errorText).toContain(`maxLogBytes ${BYTE_CAP}`);
    expect(ended.context?.turn?.attempts).toHaveLength(1); // quota is not retried

    const messages = await h.runtime.readMessages(sessionId);
    expectWholeLog(messages);
    expect(messages.slice(0, first.length)).toEqual(first);
    expect(messages.at(-1)).toMatchObject({ turn: 2, type: 'terminal.failed', content: { category: 'quota' } });
    expect(messages.filter((m) => m.turn === 2 && m.type === 'assistant').length).toBeGreaterThan(5);
    // Within the cap but for the one message that says it is full.
    expect(bytesOf(messages.slice(0, -1))).toBeLessThanOrEqual(BYTE_CAP);
    expect(
      Number(await internals(h.runtime).redis.hget(internals(h.runtime).store.key(sessionId, 'meta'), 'logBytes')),
    ).toBe(bytesOf(messages));

    // The deployment's cap, as the worker has it: the next prompt is refused, nothing written.
    const { connect, closeAll } = connector(redis.url);
    const runtime = new Runtime({ connect, prefix: h.prefix, limits: { maxLogBytes: BYTE_CAP }, policy: TEST_POLICY });
    extra.push(async () => {
      await runtime.close();
      closeAll();
    });
    const before = await sessionDump(internals(runtime).redis, internals(runtime).keys, sessionId);
    await expect(runtime.enqueue({ sessionId, prompt: 'more' })).rejects.toMatchObject({
      limit: 'maxLogBytes',
      max: BYTE_CAP,
      status: 409,
    });
    expect(await sessionDump(internals(runtime).redis, internals(runtime).keys, sessionId)).toEqual(before);
    // Over the real HTTP server: 409 naming it.
    const config = loadConfig({ prefix: h.prefix }, { SESSIOND_MAX_LOG_BYTES: String(BYTE_CAP) });
    const api = await serveApi(runtime, config);
    try {
      const r = await fetch(`${api.url}/api/sessions/${sessionId}/prompts`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: 'more' }),
      });
      expect(r.status).toBe(409);
      expect(await r.json()).toMatchObject({
        limit: 'maxLogBytes',
        max: BYTE_CAP,
        error: expect.stringContaining(`maxLogBytes ${BYTE_CAP}`),
      });
    } finally {
      await api.close(500);
    }
    expect(await sessionDump(internals(runtime).redis, internals(runtime).keys, sessionId)).toEqual(before);

    // An imported copy counts its log's bytes too: its next prompt is refused the same way.
    const copy = `${sessionId}-copy`;
    await runtime.importSession(await runtime.exportSession(sessionId), { as: copy });
    expect(Number(await internals(runtime).redis.hget(internals(runtime).store.key(copy, 'meta'), 'logBytes'))).toBe(
      bytesOf(messages),
    );
    await expect(runtime.enqueue({ sessionId: copy, prompt: 'more' })).rejects.toMatchObject({
      limit: 'maxLogBytes',
      status: 409,
    });
  });
});
