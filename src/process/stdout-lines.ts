import type { Readable } from 'node:stream';
import { LineSplitter } from './split-lines.ts';

/** After the agent exited, a reader waiting this long for more stdout gives up (a descendant holds the pipe). */
export const STDOUT_QUIET_AFTER_EXIT_MS = 500;

export interface StdoutReadHooks {
  /** Resolves when the agent process has exited. */
  exited: Promise<unknown>;
  /** The reader starts waiting for bytes. */
  onWait(): void;
  /** The reader stops waiting: bytes came, or the stream ended. */
  onWake(): void;
  quietAfterExitMs?: number;
}

const QUIET = Symbol('quiet');

/**
 * Lines of the agent's stdout, pulled chunk by chunk (the pipe applies backpressure to the agent).
 * Contract: never throws (a stream error ends the lines); if the consumer leaves early, the rest of
 * stdout is drained and dropped so the agent never blocks on a full pipe.
 */
export async function* readStdoutLines(stream: Readable, hooks: StdoutReadHooks): AsyncGenerator<string> {
  const quietMs = hooks.quietAfterExitMs ?? STDOUT_QUIET_AFTER_EXIT_MS;
  let agentExited = false;
  let onExit: (() => void) | undefined;
  void hooks.exited.then(() => {
    agentExited = true;
    onExit?.();
  });

  /** Resolves QUIET once the agent has exited and `quietMs` passed since; `cancel()` disarms it. */
  function quietAfterExit(): { promise: Promise<typeof QUIET>; cancel(): void } {
    let timer: NodeJS.Timeout | undefined;
    const promise = new Promise<typeof QUIET>((resolve) => {
      const arm = (): void => {
        timer = setTimeout(() => resolve(QUIET), quietMs);
      };
      if (agentExited) arm();
      else onExit = arm;
    });
    return {
      promise,
      cancel() {
        onExit = undefined;
        clearTimeout(timer);
      },
    };
  }

  const chunks = stream.iterator({ destroyOnReturn: false });

  async function nextChunk(): Promise<Buffer | null> {
    hooks.onWait();
    const pending = chunks.next();
    const quiet = quietAfterExit();
    try {
      const result = await Promise.race([pending, quiet.promise]);
      if (result === QUIET) {
        // The stream is being destroyed: its pending read may reject, and nobody waits for it.
        pending.catch(() => undefined);
        stream.destroy();
        return null;
      }
      if (result.done === true) return null;
      const value: unknown = result.value;
      return typeof value === 'string' ? Buffer.from(value, 'utf8') : (value as Buffer);
    } catch {
      return null; // the stream failed: what was read stands, nothing more comes
    } finally {
      quiet.cancel();
      hooks.onWake();
    }
  }

  const splitter = new LineSplitter();
  let finished = false;
  try {
    for (let chunk = await nextChunk(); chunk !== null; chunk = await nextChunk()) {
      yield* splitter.push(chunk);
    }
    finished = true;
    const last = splitter.flush();
    if (last !== undefined) yield last;
  } finally {
    if (!finished) {
      // Ending early: an error closing the iterator changes nothing, the stream is drained below.
      await chunks.return?.().catch(() => undefined);
      void drain(stream);
    }
  }
}

/** Reads and drops the rest of `stream`, so the agent never blocks writing to it. */
async function drain(stream: Readable): Promise<void> {
  try {
    for await (const _chunk of stream.iterator({ destroyOnReturn: false })) {
      // dropped: nobody reads these lines any more
    }
  } catch {
    // the stream failed: nothing left to drain
  }
}
