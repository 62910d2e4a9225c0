import { createAttemptActors } from '../../machines/attempt-actor.ts';
import { withAttemptActors, type SessionMachine } from '../../machines/session.machine.ts';
import { nextAttemptOptions } from '../../machines/turn.ts';
import type { AttemptRunner, MessageSink } from '../../machines/types.ts';

/** Says whether the attempt with these turn options must wait for the runtime's admission (fleet limits, paused dispatch). */
type Gate = (options: Readonly<Record<string, unknown>>) => boolean;

interface Driver {
  runner: AttemptRunner;
  sink: MessageSink;
  gate?: Gate;
}

/**
 * One session machine for all the sessions a worker drives (building one per session is costly):
 * its attempt actors find each session's runner and sink by session id, attached by the session's
 * holder for as long as it drives it.
 */
export class SharedSessionMachine {
  readonly machine: SessionMachine;
  readonly #drivers = new Map<string, Driver>();

  constructor() {
    this.machine = withAttemptActors(
      createAttemptActors(
        (request, context) => this.#driver(request.sessionId).runner(request, context),
        (message, meta) => this.#driver(meta.sessionId).sink(message, meta),
      ),
    ).provide({
      guards: {
        admissionRequired: ({ context }) =>
          this.#drivers.get(context.sessionId)?.gate?.(nextAttemptOptions(context)) ?? false,
      },
    });
  }

  /** Routes the session's attempts to `runner` and `sink`; returns the detach function. */
  attach(sessionId: string, runner: AttemptRunner, sink: MessageSink, gate?: Gate): () => void {
    const driver: Driver = gate === undefined ? { runner, sink } : { runner, sink, gate };
    this.#drivers.set(sessionId, driver);
    return () => {
      // A stale holder that ends late must not detach the session's next holder.
      if (this.#drivers.get(sessionId) === driver) this.#drivers.delete(sessionId);
    };
  }

  #driver(sessionId: string): Driver {
    const driver = this.#drivers.get(sessionId);
    if (driver === undefined) throw new Error(`session ${sessionId} is not driven here`);
    return driver;
  }
}
