import { cancelStage } from '../../process/cancel-stages.ts';
import type { AttemptRunner } from '../../../machines/types.ts';
import type { SandboxMode } from '../../process/index.ts';
import { isTerminal, terminalFailed, type CliMessage } from '../../protocol/index.ts';
import { AttemptApprovals } from '../approvals/gate.ts';
import type { ApprovalStore } from '../approvals/store.ts';
import { admitTurn, refusedAttempt } from '../deployment-policy.ts';
import { markerScope } from '../orphans.ts';
import type { SessionWriter } from '../session-writer.ts';
import type { SessionStore } from '../store/session-store.ts';
import { LogRoom } from '../store/log-room.ts';
import type { SessionTracer } from '../tracing/session-tracer.ts';
import { exportAgentState, importAgentState, prepareAgentAttempt } from './agent-attempt.ts';
import type { ActiveSessionConfig, WarnLog } from './config.ts';
import type { RetryPolicy } from '../../retry/index.ts';
import { abandonWith, attemptSetup, recordInWorkspace, workspaceStartFailed } from './workspace-setup.ts';
import { WorkspaceQuotaError } from '../../workspace/types.ts';
import { AttemptWorkspace, quotaMessage } from './workspace-attempt.ts';
import { takeBackInterrupted } from './rollback.ts';
import { closedCallError, closingOf, OpenToolCalls, stoppedTerminal, type AttemptStop } from './attempt-end.ts';
import { AttemptSteering, steeringText } from './steering.ts';
import type { PendingSteer } from '../store/session-store.ts';

export interface RunnerInit {
  store: SessionStore;
  writer: SessionWriter;
  config: ActiveSessionConfig;
  sessionId: string;
  /** The holder's lease token (the approval gate's writes are fenced with it). */
  token: string;
  approvals: ApprovalStore;
  tracer: SessionTracer | null;
  /** The runner generators of this session still running (aborted ones included). */
  running: Set<Promise<void>>;
  /** The attempt's process tree is gone: its fleet-limit hold goes back. */
  releaseHold: (terminal: CliMessage | null) => Promise<void>;
  /** An approval request is about to be stored (the holder clears them when the turn is over). */
  approvalStored: () => void;
  /** Subscribes to "an approval decision was stored for this session"; returns the unsubscribe. */
  onDecision: (listener: () => void) => () => void;
  /** Subscribes to "look at the pending steers again" (a steer accepted, the poll); returns the unsubscribe. */
  onSteer: (listener: () => void) => () => void;
  warn: WarnLog;
  /** The retry policy the session's turns run under now (its `workspace` mode). */
  retryPolicy: () => RetryPolicy | null;
  /**
   * Why the machine stopped this attempt (its signal aborted): a cancel or the turn's wall-clock limit; null when
   * the holder let go of the session (the next holder finds the attempt interrupted) or the attempt is not current.
   */
  stopOf: (turn: number, attempt: number) => AttemptStop | null;
  /** `turn/attempt` of the last attempt whose terminal.completed reached the log (message-sink.ts). */
  answered: () => string | null;
  /** What the attempt records with its completed end, queued with its terminal.completed only (message-sink.ts). */
  setAnswerRecord: (turn: number, attempt: number, record: (() => void) | null) => void;
}

/**
 * One attempt of the session's turn, as the machine's attempt actor runs it: the stored request
 * checked again against the deployment policy, the agent's own state brought in, the agent run
 * (its approvals through the session's gate, its log within maxLogMessages and maxLogBytes), its state carried out.
 * The actor aborts `signal` when the machine leaves `running` (a cancel, a timeout): the agent's
 * provider then stops its process tree, and the generator ends with sessiond's terminal message saying
 * why (attempt-end.ts). Every attempt ends once in the log: tool calls still open then are closed first.
 */
export function attemptRunner(init: RunnerInit): AttemptRunner {
  const { store, writer, config, sessionId, running, tracer } = init;
  const scope = markerScope(store.keys.prefix);
  return async function* runAttempt(request, { signal, spawned, promptRecorded }) {
    let ended: () => void = () => undefined;
    const done = new Promise<void>((resolve) => (ended = resolve));
    running.add(done);
    let terminal: CliMessage | null = null;
    /** The attempt's terminal message is in the log: nothing may end it again. */
    let told = false;
    const calls = new OpenToolCalls();
    /** The log's room for this attempt (null until it is opened: no call can be open before). */
    let room: LogRoom | null = null;
    /** The `tool.failed` closing each open call, counted in the log's room (held for it when the call came). */
    function* closeCalls(why: string): Generator<CliMessage> {
      for (const close of calls.close(why)) {
        room?.settle(close);
        yield close;
      }
    }
    let workspace: AttemptWorkspace | null = null;
    /**
     * The attempt's end is settled in its workspace: its completed end stored with its terminal.completed, or the
     * copy sent back. Until then any end sends the copy back to the latest recorded point.
     */
    let settled = false;
    try {
      // The turn's trace context goes with it: a worker that takes the turn over after a crash joins the same trace.
      const traced = tracer?.beginAttempt(request.turn, request.attempt) ?? null;
      if (traced?.store != null) writer.trace(traced.store);
      // The snapshot saying this attempt runs is in Redis before the agent starts.
      await writer.flush();
      // Options read back from Redis are a caller's: checked again, as at enqueue, before anything runs.
      const admitted = await admitTurn(config.policy, request.options, request.text);
      if (!admitted.ok) {
        yield refusedAttempt(admitted.issues);
        return;
      }
      // A session whose caller named no cwd runs in its own workspace (when this worker has workspaces).
      const setup = attemptSetup(config.workspaces ?? null, sessionId, request.options, admitted.options);
      if (setup.refused !== null) {
        yield setup.refused;
        return;
      }
      const attempt = await prepareAgentAttempt({
        agentName: admitted.agent,
        hostOptions: config.agentOptions,
        callerOptions: setup.options,
        sessionId,
        scope,
      });
      // A turn interrupted by a whenBusy "rollback" prompt is taken back before this one's workspace is prepared.
      await takeBackInterrupted({ store, writer, sessionId, request, attempt, workspace: setup.workspaces !== null });
      let text = request.text;
      let resumeSessionId = request.agentSessionId;
      /** A record of the agent's state that holds the steers a run started with is in the writer's batch (below). */
      let steersRecorded: () => void = () => undefined;
      if (setup.workspaces !== null) {
        workspace = new AttemptWorkspace({
          workspaces: setup.workspaces,
          store,
          writer,
          sessionId,
          request,
          attempt,
          rollback: init.retryPolicy()?.workspace === 'rollback',
          warn: init.warn,
          onRecorded: () => steersRecorded(),
        });
        try {
          ({ text, resumeSessionId } = await workspace.begin(setup.source));
        } catch (error) {
          yield error instanceof WorkspaceQuotaError ? quotaMessage(error) : workspaceStartFailed(error);
          return;
        }
      }
      // In a workspace the agent's state is the one recorded with its files, even where this host's copy is further along.
      await importAgentState(attempt, store, sessionId, resumeSessionId, { exact: workspace !== null });
      let agentSessionId = resumeSessionId;
      // The log caps (messages, bytes: store/log-room.ts): one slot is kept for the terminal message that says the log is full.
      room = await LogRoom.open(store, sessionId, {
        maxLogMessages: config.maxLogMessages ?? 0,
        maxLogBytes: config.maxLogBytes ?? 0,
      });
      if (room.full) {
        yield room.fullMessage();
        return;
      }
      const gate = new AttemptApprovals({
        store: init.approvals,
        sessionId,
        token: init.token,
        agent: attempt.agentName,
        turn: request.turn,
        attempt: request.attempt,
        policy: config.policy.approvals,
        pollMs: config.pollMs,
        onStore: init.approvalStored,
        onDecision: init.onDecision,
      });
      // Steers for the running turn (issue 29): the agent's own channel when its definition has one, else the
      // fallback — the attempt's agent stopped at its next tool boundary and run again, in the same attempt, with the
      // steers' text in its resumed conversation (no new turn, no failure counted). An agent whose channel is
      // `advertised` (ACP) says as it starts whether it has one (steeringNative): the fallback until it does.
      const mode = attempt.agent.steering;
      let native = mode === 'native';
      const steering = new AttemptSteering({
        store,
        writer,
        sessionId,
        turn: request.turn,
        attempt: request.attempt,
        onSteer: init.onSteer,
        warn: init.warn,
      });
      await steering.start();
      /** Steers the next run of the agent starts with (its prompt, or after the attempt's own). */
      let steered: PendingSteer[] = [];
      /**
       * Steers a run of this attempt started with that no durable record of the agent's state holds yet. They stay
       * pending in Redis until one does: a worker that dies meanwhile leaves them to the next attempt, which starts
       * with them (below). Their `prompt.steered` goes in the same writer batch, so the same fenced write, as that
       * record: a workspace's recorded point after one of the run's tool results or at its completed end
       * (workspace-attempt.ts); in a caller's cwd, the agent's state carried out to Redis once its agent is known to
       * have recorded the run's prompt (`runRecorded`). Never both delivered and missing from the state a retry
       * resumes; never pending and held by it (but in a cwd, where the host's own copy may be further along).
       */
      let unsaved: PendingSteer[] = [];
      /**
       * The agent has recorded the current run's prompt: the model answered it (a resumed session records its prompt
       * before the request; the agents' own measures: their mappers' `promptRecorded`), or its end says so.
       */
      let runRecorded = false;
      steersRecorded = () => {
        for (const steer of unsaved) steering.deliver(steer, 'restart');
        unsaved = [];
      };
      // Steers accepted while no attempt ran (a backoff, a worker that died before delivering them) go with this
      // attempt's prompt: nothing has run since they were accepted.
      if (!native && steering.hasPending) {
        steered = steering.takeAll();
        text = `${text}\n\n${steeringText(steered)}`;
      }
      try {
        let full = false;
        let quota: CliMessage | null = null;
        /** The attempt's end when its provider threw or ended without one. */
        let crashed: CliMessage | null = null;
        let runText = text;
        let runSession = resumeSessionId;
        try {
          for (;;) {
            /** The fallback's steers taken at a tool boundary: the agent runs again with them. */
            let restart: PendingSteer[] | null = null;
            unsaved = [...unsaved, ...steered];
            steered = [];
            runRecorded = false;
            for await (const message of attempt.agent.run(
              { text: runText, resumeSessionId: runSession, options: attempt.options },
              {
                ...(mode === undefined ? {} : { steering: steering.channel(signal) }),
                ...(mode === 'advertised' ? { steeringNative: () => (native = true) } : {}),
                signal,
                marker: attempt.marker,
                approvals: gate,
                sandbox: { required: config.policy.sandbox?.required === true },
                onSpawn: (agent: { pid: number; startTime: string | null; sandbox: SandboxMode }) => {
                  // Its own processes told from its tools' (pause-processes.ts): whether a completed end can reuse a snapshot.
                  workspace?.agentStarted({ pid: agent.pid, startTime: agent.startTime, sandbox: agent.sandbox });
                  spawned?.({ sandbox: agent.sandbox });
                },
                ...(config.limits === undefined ? {} : { limits: config.limits }),
                ...(traced === null ? {} : { traceparent: traced.traceparent }),
                ...(config.onEgressRefused === undefined
                  ? {}
                  : {
                      egress: {
                        sessionId,
                        turn: request.turn,
                        attempt: request.attempt,
                        allow: config.policy.network[attempt.agentName] ?? [],
                        onRefused: config.onEgressRefused,
                      },
                    }),
              },
            )) {
              // Only sessiond says a steer reached the turn (below): an agent's own claim is not stored.
              if (message.type === 'prompt.steered') continue;
              // Only sessiond says an attempt was cancelled: an agent (a library's own) that says so has failed its contract.
              if (message.type === 'terminal.cancelled' && !signal.aborted) {
                yield* closeCalls('the attempt failed: invalid_output');
                terminal = terminalFailed(
                  'the agent sent terminal.cancelled, which only sessiond writes',
                  'invalid_output',
                );
                told = true;
                yield terminal;
                break;
              }
              if (message.type === 'session.started' || message.type === 'session.resumed')
                agentSessionId = message.content.sessionId;
              // The machine stopped the attempt: the turn does not end as the agent says (it finished as the
              // stop arrived, or failed on it), so its own end is not stored; sessiond's says why (below).
              if (signal.aborted && isTerminal(message)) continue;
              if (!room.admit(message, message.type === 'tool.call' ? closingOf(message) : undefined)) {
                // Leaving the loop stops the agent's process tree before going on.
                full = true;
                break;
              }
              let out: CliMessage = message;
              if (workspace !== null) {
                const recorded = await recordInWorkspace(workspace, message, agentSessionId, signal, init.warn);
                if (recorded.kind === 'quota') {
                  // Leaving the loop stops the agent's process tree before going on.
                  quota = recorded.message;
                  break;
                }
                if (recorded.kind === 'replace') out = recorded.message;
                // The completed end goes in the write that stores the terminal.completed, and only if it is stored:
                // the attempt actor drops it once the machine has stopped the attempt (a cancel won the race).
                if (recorded.kind === 'answer') init.setAnswerRecord(request.turn, request.attempt, recorded.record);
              }
              if (workspace !== null && out.type === 'terminal.failed' && !settled) {
                settled = true;
                out = await abandonWith(workspace, out, writer, true, init.warn);
              }
              if (isTerminal(out)) {
                // The agent's own end says whether it kept the prompt (a failed first request may take it back).
                runRecorded = holdsPrompt(out);
                if (workspace === null && unsaved.length > 0 && runRecorded) {
                  // Its state holds the steers: carried out with their delivery, before the attempt's end is told.
                  await exportAgentState(attempt, writer, agentSessionId, init.warn);
                  steersRecorded();
                }
                terminal = out;
                yield* closeCalls(closedCallError(out));
                yield out;
                // A terminal.completed the attempt actor received after the stop is not stored (machines/attempt-actor.ts),
                // nor is what its workspace took with it: the stop's end below sends the copy back.
                told = out.type !== 'terminal.completed' || init.answered() === `${request.turn}/${request.attempt}`;
                if (out.type === 'terminal.completed' && told) settled = true;
                continue;
              }
              calls.observe(out);
              if (ANSWERED.has(out.type)) runRecorded = true;
              yield out;
              // The fallback's safe point: a tool's result is recorded (in the workspace too) and no call is open. Read
              // again there, so that every steer stored before it is delivered at it (not one boundary later).
              const boundary =
                !native && (out.type === 'tool.completed' || out.type === 'tool.failed') && calls.size === 0;
              if (boundary && !steering.hasPending && !signal.aborted) await steering.refresh();
              if (boundary && steering.hasPending && !signal.aborted) {
                restart = steering.takeAll();
                // Leaving the loop stops the agent's process tree before going on.
                break;
              }
            }
            if (restart === null || signal.aborted) break;
            // The agent is gone at a tool boundary: its conversation so far (the steers it ran with included) goes to
            // Redis, and it goes on with the new steers.
            if (workspace === null) {
              await exportAgentState(attempt, writer, agentSessionId, init.warn);
              steersRecorded();
            }
            steered = restart;
            runText = steeringText(restart);
            runSession = agentSessionId;
          }
        } catch (error) {
          // The machine stopped the attempt: the provider rejects with the abort once its process tree is gone.
          if (signal.aborted) {
            // The stop below says how the attempt ended.
          } else if (terminal === null) {
            // The provider threw: its process tree is gone (the loop was left); the log says the attempt failed.
            crashed = terminalFailed(
              `the provider threw: ${(error as Error).message ?? String(error)}`,
              'process_crash',
            );
          } else throw error;
        }
        // The provider ended with no terminal message of its own (and nothing stopped it): the attempt failed.
        if (crashed === null && terminal === null && !full && quota === null && !signal.aborted)
          crashed = terminalFailed('the provider ended without a terminal message', 'process_crash');
        if (crashed !== null) {
          const end =
            workspace !== null && !settled ? await abandonWith(workspace, crashed, writer, true, init.warn) : crashed;
          settled = true;
          terminal = end;
          yield* closeCalls(closedCallError(end));
          told = true;
          yield end;
        }
        if (full || quota !== null) {
          // The agent's process tree is gone (the loop was left): the copy goes back before the terminal is told.
          const stopped = quota ?? room.fullMessage();
          const end =
            workspace !== null && !settled ? await abandonWith(workspace, stopped, writer, true, init.warn) : stopped;
          settled = true;
          terminal = end;
          yield* closeCalls(closedCallError(end));
          told = true;
          yield end;
        }
        const stop = signal.aborted && !told ? init.stopOf(request.turn, request.attempt) : null;
        if (stop !== null) {
          // The agent's process tree is gone: the log says how the attempt ended (a timeout fails it, as a failure would).
          let end: CliMessage = stoppedTerminal(stop);
          if (workspace !== null && !settled) {
            settled = true;
            end = await abandonWith(workspace, end, writer, stop.kind === 'timeout', init.warn);
          }
          terminal = end;
          yield* closeCalls(closedCallError(end));
          told = true;
          yield end;
        }
      } finally {
        steering.close();
        init.setAnswerRecord(request.turn, request.attempt, null);
        if (workspace === null) {
          const saved = await exportAgentState(attempt, writer, agentSessionId, init.warn);
          // Stopped or crashed once the model had answered the run: the state carried out holds its steers.
          if (runRecorded) steersRecorded();
          // A stopped attempt whose agent saved its conversation (pi writes it with the prompt) leaves it for the next
          // turn to resume, as a failed one with its prompt recorded does. In a workspace the stop takes it back instead.
          if (saved && signal.aborted) promptRecorded?.();
        } else if (!settled) {
          // Cancelled, stopped, or the provider threw: the copy goes back to the latest recorded point.
          settled = true;
          await abandonWith(workspace, null, writer, false, init.warn);
        }
      }
    } finally {
      // The agent's process tree is gone: its fleet-limit slot goes back, and whoever it makes room for is woken.
      await init
        .releaseHold(terminal)
        .catch((error: unknown) => init.warn('a fleet-limit hold was not given back', error));
      if (signal.aborted) cancelStage(sessionId, 'ended');
      running.delete(done);
      ended();
    }
  };
}

/** The agent's messages that answer a run's prompt: once one came, the agent has recorded that prompt. */
const ANSWERED = new Set<string>([
  'assistant',
  'assistant.thought',
  'tool.call',
  'tool.update',
  'tool.completed',
  'tool.failed',
]);

/** The agent's own state holds the prompt of the run that ended with `terminal`: it completed, or failed saying so. */
function holdsPrompt(terminal: CliMessage): boolean {
  if (terminal.type === 'terminal.completed') return true;
  return terminal.type === 'terminal.failed' && terminal.content.promptRecorded === true;
}
