import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pi } from '../../../src/agents/pi/definition.ts';
import { runPi } from '../../../src/agents/pi/provider.ts';
import type { PiOptionsInput } from '../../../src/agents/pi/options.ts';
import type { Steer, SteeringChannel } from '../../../src/agents/shared/steering.ts';
import { findProcessesByMarker } from '../../../src/process/index.ts';
import type { CliMessage } from '../../../src/protocol/index.ts';
import { hasToolResult, startFakeModelServer, type FakeModelServer } from '../../support/fake-model-server.ts';
import { createPiEnv, type PiEnv } from '../../support/pi-env.ts';
import { piHostOptions } from '../../support/runtime.ts';
import { failure, terminalOf } from '../contract.ts';

/** A steering channel as the runtime gives one: steers pushed by the test, deliveries recorded. */
class TestSteering implements SteeringChannel {
  readonly reported: string[] = [];
  /** Resolves with each steer once the provider took it from the channel (it writes it right then). */
  readonly taken: Steer[] = [];
  readonly #queue: Steer[] = [];
  #wake: (() => void) | null = null;
  #ended = false;
  #onTaken: (() => void) | null = null;

  push(steer: Steer): void {
    this.#queue.push(steer);
    this.#wake?.();
  }

  end(): void {
    this.#ended = true;
    this.#wake?.();
  }

  /** Resolves once the provider has taken `count` steers. */
  async takenCount(count: number): Promise<void> {
    while (this.taken.length < count) await new Promise<void>((resolve) => (this.#onTaken = resolve));
  }

  async *pending(): AsyncIterable<Steer> {
    for (;;) {
      const next = this.#queue.shift();
      if (next !== undefined) {
        this.taken.push(next);
        this.#onTaken?.();
        yield next;
        continue;
      }
      if (this.#ended) return;
      await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#wake = null;
    }
  }

  delivered(promptId: string): void {
    this.reported.push(promptId);
  }
}

const STEER_TEXT = 'Steering: also print the date.';
/** The bash tool waits for this file: the test creates it once the steer was written to pi. */
let gate: string;
let server: FakeModelServer;
let env: PiEnv;
let stateDir: string;

beforeAll(async () => {
  server = await startFakeModelServer();
  stateDir = mkdtempSync(join(tmpdir(), 'sessiond-state-'));
  gate = join(stateDir, 'tool-may-end');
  server.setScript('steer-tool', ({ body }) =>
    hasToolResult(body)
      ? { text: 'Done, steered.' }
      : {
          toolCalls: [
            { name: 'bash', arguments: { command: `while [ ! -e '${gate}' ]; do sleep 0.1; done; echo tool-done` } },
          ],
        },
  );
  server.setScript('slow-midclose', {
    text: ['Partial', ' answer', ' never'],
    then: 'drop',
    afterChunks: 2,
    chunkDelayMs: 300,
  });
  env = createPiEnv({ serverUrl: server.url, extraModels: ['steer-tool', 'slow-midclose'] });
});

afterAll(async () => {
  await server.close();
  env.cleanup();
  rmSync(stateDir, { recursive: true, force: true });
});

function options(model: string): PiOptionsInput {
  return { prompt: 'Run the tool.', provider: 'fake', model, cwd: env.cwd, ...piHostOptions(env, stateDir) };
}

/** The user texts of a request the fake model got, in order. */
function userTexts(model: string, index: number): string[] {
  const body = server.requestsFor(model)[index]!.body;
  return (body.messages ?? []).filter((m) => m.role === 'user').map((m) => JSON.stringify(m.content));
}

describe('pi steering through its rpc channel (real pi, fake model)', () => {
  it("pi's definition declares its native channel", () => {
    expect(pi.steering).toBe('native');
  });

  it('a steer sent during a long bash tool reaches the model in the same turn, and is reported delivered once', async () => {
    rmSync(gate, { force: true });
    const steering = new TestSteering();
    let marker = '';
    const out: CliMessage[] = [];
    const opening = (async () => {
      await steering.takenCount(1);
      // The provider wrote the steer to pi's stdin as it took it; the tool then ends.
      await new Promise((resolve) => setTimeout(resolve, 500));
      writeFileSync(gate, '');
    })();
    for await (const m of runPi(options('steer-tool'), { steering, onSpawn: (a) => (marker = a.marker) })) {
      out.push(m);
      if (m.type === 'tool.call') steering.push({ promptId: 'p-steer-1', text: STEER_TEXT });
    }
    steering.end();
    await opening;
    expect(terminalOf(out)).toMatchObject({ type: 'terminal.completed', content: { stopReason: 'stop' } });
    // One turn: the request after the tool result carries the steering text, and there is no other request.
    const requests = server.requestsFor('steer-tool');
    expect(requests).toHaveLength(2);
    expect(userTexts('steer-tool', 0).join()).not.toContain(STEER_TEXT);
    expect(userTexts('steer-tool', 1).at(-1)).toContain(STEER_TEXT);
    expect(steering.reported).toEqual(['p-steer-1']);
    expect(out.filter((m) => m.type === 'tool.completed')).toHaveLength(1);
    expect(await findProcessesByMarker(marker)).toEqual([]);
  });

  it('a steer pi never took (the turn ended on a failed model call) is not reported delivered', async () => {
    const steering = new TestSteering();
    let marker = '';
    const out: CliMessage[] = [];
    let pushed = false;
    for await (const m of runPi(options('slow-midclose'), { steering, onSpawn: (a) => (marker = a.marker) })) {
      out.push(m);
      // While the answer streams: pi queues the steer, and the failed call ends its run without taking it.
      if (m.type === 'assistant' && !pushed) {
        pushed = true;
        steering.push({ promptId: 'p-late', text: STEER_TEXT });
      }
    }
    steering.end();
    expect(failure(out).category).toBe('network');
    expect(steering.reported).toEqual([]);
    expect(server.requestsFor('slow-midclose')).toHaveLength(1);
    expect(await findProcessesByMarker(marker)).toEqual([]);
  });

  it('cancel while a steer waits for the running tool: rejects, reports nothing, leaves no process', async () => {
    rmSync(gate, { force: true });
    const steering = new TestSteering();
    const controller = new AbortController();
    let marker = '';
    const run = (async () => {
      for await (const m of runPi(options('steer-tool'), {
        signal: controller.signal,
        steering,
        onSpawn: (a) => (marker = a.marker),
      })) {
        if (m.type === 'tool.call') {
          steering.push({ promptId: 'p-cancelled', text: STEER_TEXT });
          void steering.takenCount(1).then(() => controller.abort());
        }
      }
    })();
    await expect(run).rejects.toMatchObject({ name: 'AbortError' });
    steering.end();
    expect(steering.reported).toEqual([]);
    expect(existsSync(gate)).toBe(false);
    expect(await findProcessesByMarker(marker)).toEqual([]);
  });
});
