import type { CliMessage, FailureCategory } from '../../src/index.ts';
import type { AttemptMeta, AttemptRequest, AttemptRunner } from '../../machines/types.ts';

export type Step =
  | { kind: 'complete'; text?: string }
  | { kind: 'fail'; category: FailureCategory; retryAfterMs?: number; afterText?: string; promptRecorded?: boolean }
  /** Throws `message` before anything (`after: 'terminal'`: once its terminal.failed is out, as a failing cleanup). */
  | { kind: 'throw'; message: string; after?: 'terminal' }
  /** Runs until aborted; then takes `stopMs` (timer time) to stop, like a process tree going down. */
  | { kind: 'hang'; stopMs?: number };

/**
 * An in-process provider for unit tests: each attempt takes the next step of
 * the script (the last one repeats). Records every request and the highest
 * number of attempts that ran at once.
 */
export class FakeRunner {
  readonly requests: AttemptRequest[] = [];
  readonly messages: Array<{ message: CliMessage; meta: AttemptMeta }> = [];
  running = 0;
  maxConcurrent = 0;
  stopsFinished = 0;
  #steps: Step[];

  constructor(steps: Step[]) {
    this.#steps = steps;
  }

  setSteps(steps: Step[]): void {
    this.#steps = steps;
  }

  readonly run: AttemptRunner = (request, { signal }) => this.#attempt(request, signal);

  readonly sink = (message: CliMessage, meta: AttemptMeta): void => {
    this.messages.push({ message, meta });
  };

  async *#attempt(request: AttemptRequest, signal: AbortSignal): AsyncGenerator<CliMessage> {
    this.requests.push(request);
    const step = this.#steps[Math.min(this.requests.length - 1, this.#steps.length - 1)] ?? { kind: 'complete' };
    this.running += 1;
    this.maxConcurrent = Math.max(this.maxConcurrent, this.running);
    try {
      if (step.kind === 'throw' && step.after === undefined) throw new Error(step.message);
      const sessionId = request.agentSessionId ?? `agent-${request.sessionId}`;
      yield { type: request.agentSessionId ? 'session.resumed' : 'session.started', content: { sessionId } };
      if (step.kind === 'complete') {
        yield { type: 'assistant', content: { text: step.text ?? `answer to ${request.text}` } };
        yield { type: 'terminal.completed', content: { stopReason: 'stop' } };
        return;
      }
      if (step.kind === 'throw') {
        yield {
          type: 'terminal.failed',
          content: { text: 'fake failure', category: 'server_error', stderr: '', invalid_output_lines: [] },
        };
        throw new Error(step.message);
      }
      if (step.kind === 'fail') {
        if (step.afterText !== undefined) yield { type: 'assistant', content: { text: step.afterText } };
        yield {
          type: 'terminal.failed',
          content: {
            text: `fake ${step.category}`,
            category: step.category,
            stderr: '',
            invalid_output_lines: [],
            ...(step.retryAfterMs === undefined ? {} : { retryAfterMs: step.retryAfterMs }),
            promptRecorded: step.promptRecorded ?? true,
          },
        };
        return;
      }
      yield { type: 'assistant', content: { text: 'working…' } };
      await new Promise<void>((resolve) => {
        if (signal.aborted) resolve();
        else signal.addEventListener('abort', () => resolve(), { once: true });
      });
      await new Promise((resolve) => setTimeout(resolve, step.stopMs ?? 0));
      this.stopsFinished += 1;
      throw signal.reason;
    } finally {
      this.running -= 1;
    }
  }
}
