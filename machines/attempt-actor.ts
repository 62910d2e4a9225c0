import { fromCallback, fromPromise } from 'xstate';
import { isAgentTerminal, type AgentTerminalMessage } from '../src/protocol/index.ts';
import type { SandboxMode } from '../src/process/sandbox/types.ts';
import type { AttemptEvent, AttemptRequest, AttemptRunner, MessageSink } from './types.ts';

/**
 * The provider as XState actors: `attempt` runs one attempt and reports to the
 * machine only what changes its course (the agent's session id and the
 * terminal message); every message goes to the
 * sink, never into the machine's context. Leaving the invoking state aborts the
 * attempt's signal; `attemptStopped` resolves once that attempt has fully ended
 * (its process tree gone), so a cancel can wait for it, with whether the stopped attempt had
 * recorded its prompt in the agent's conversation.
 */
export function createAttemptActors(runner: AttemptRunner, sink: MessageSink) {
  const inFlight = new Map<string, Promise<StoppedAttempt>>();

  const attempt = fromCallback<{ type: 'noop' }, AttemptRequest, AttemptEvent>(({ input, sendBack }) => {
    const controller = new AbortController();
    const key = attemptKey(input);
    const meta = { sessionId: input.sessionId, turn: input.turn, attempt: input.attempt };
    // Set before the last sendBack: the machine leaves `running` (and calls the cleanup below) inside it.
    let ended = false;
    let promptRecorded = false;
    const run = async (): Promise<void> => {
      let terminal: AgentTerminalMessage | null = null;
      /** The runner's throw, as the attempt's end, when it had stored none. */
      let lost: AgentTerminalMessage | null = null;
      try {
        // The sandbox the agent's process runs in goes on the attempt's record (inspect shows it).
        const spawned = ({ sandbox }: { sandbox: SandboxMode }): void => {
          if (!controller.signal.aborted) sendBack({ type: 'attempt.spawned', sandbox });
        };
        const recorded = (): void => {
          promptRecorded = true;
        };
        for await (const message of runner(input, { signal: controller.signal, spawned, promptRecorded: recorded })) {
          // Once the machine has left `running` (a cancel, the turn's deadline) the turn does not end
          // completed, so an agent's terminal.completed then (it finished as the stop arrived, or ended
          // on the abort) is not stored: a session's log never says completed for a turn that was not.
          if (controller.signal.aborted && message.type === 'terminal.completed') continue;
          // A sink that has nothing to wait for returns undefined: no microtask per message then.
          const sunk = sink(message, meta);
          if (sunk !== undefined) await sunk;
          if (controller.signal.aborted) continue;
          // The machine only needs a session id it does not hold yet (a resumed session keeps its id).
          if (
            (message.type === 'session.started' || message.type === 'session.resumed') &&
            message.content.sessionId !== input.agentSessionId
          ) {
            sendBack({ type: 'attempt.session', agentSessionId: message.content.sessionId });
          }
          if (isAgentTerminal(message)) terminal = message;
        }
      } catch (error) {
        if (controller.signal.aborted) return;
        // A terminal already stored stays the attempt's end: the log says each attempt ended once.
        if (terminal === null) lost = crashed(`the provider threw: ${(error as Error).message ?? String(error)}`);
      }
      if (controller.signal.aborted) return;
      if (terminal === null) {
        // The runner threw before its own end (while preparing the attempt, say) or ended without one: the log
        // says the attempt failed, as the machine is told, so that every attempt ends once in the log too.
        terminal = lost ?? crashed('the provider ended without a terminal message');
        try {
          await sink(terminal, meta);
        } catch {
          // The store refused it (the lease is gone): the next holder finds the attempt interrupted and says so.
        }
      }
      ended = true;
      sendBack({ type: 'attempt.ended', terminal });
    };
    const done = run()
      .then(() => ({ promptRecorded }))
      .finally(() => {
        if (inFlight.get(key) === done) inFlight.delete(key);
      });
    inFlight.set(key, done);
    // Aborting an attempt that has ended would only build an AbortError per attempt.
    return () => {
      if (!ended) controller.abort();
    };
  });

  const attemptStopped = fromPromise<StoppedAttempt, { sessionId: string; turn: number; attempt: number }>(
    async ({ input }) => (await inFlight.get(attemptKey(input))) ?? { promptRecorded: false },
  );

  return { attempt, attemptStopped };
}

/** What a stopped attempt left: whether the agent's conversation holds its prompt. */
export interface StoppedAttempt {
  promptRecorded: boolean;
}

function attemptKey(meta: { sessionId: string; turn: number; attempt: number }): string {
  return `${meta.sessionId}\u0000${meta.turn}\u0000${meta.attempt}`;
}

function crashed(text: string): AgentTerminalMessage {
  return {
    type: 'terminal.failed',
    content: { text, category: 'process_crash', stderr: '', invalid_output_lines: [] },
  };
}
