import { resolve } from 'node:path';
import * as acp from '@agentclientprotocol/sdk';
import type { CliMessage } from '../../protocol/index.ts';
import type { AgentProcess } from '../../process/index.ts';
import type { AttemptExit } from '../shared/agent-mapper.ts';
import { InvalidLines } from '../shared/invalid-lines.ts';
import { EXIT_GRACE_MS } from '../shared/run-attempt.ts';
import type { ApprovalGate } from '../shared/approval-gate.ts';
import { exitFailure, failedMessage, type FailureFacts } from '../shared/terminal.ts';
import { rpcFailure } from './failure.ts';
import { OPENCODE_AGENT_NAME, opencodeRetries } from './opencode-retries.ts';
import { QWEN_AGENT_NAME, qwenRetries } from './qwen-retries.ts';
import { AcpUpdates, completedMessage } from './mapper.ts';
import { MessageQueue } from './message-queue.ts';
import type { AcpOptions } from './options.ts';
import { answerPermission } from './permissions.ts';
import { rpcStreams } from './rpc-streams.ts';
import { AcpSteering, advertisesSteering, STEER_METHOD } from './steering.ts';
import type { SteeringChannel } from '../shared/steering.ts';

/** The request sent after a `session/load` to learn that the agent's replay is over (ACP's `_` prefix: an extension method). */
export const REPLAY_FENCE_METHOD = '_sessiond/replay_fence';
/** How long an agent that answers no unknown request at all is waited for (then its replay is taken as over). */
const REPLAY_FENCE_MAX_MS = 5000;

type Outcome = { ok: true; response: acp.PromptResponse } | { ok: false; facts: FailureFacts | null };

/**
 * One attempt's conversation with a spawned ACP agent (see runAcp): the session opened, the
 * prompt sent, its updates and permission requests mapped, the process stopped.
 */
export class AcpTurn {
  readonly #agent: AgentProcess;
  readonly #options: AcpOptions;
  readonly #updates = new AcpUpdates();
  readonly #queue = new MessageQueue();
  readonly #invalid = new InvalidLines();
  #sessionId: string | null = null;
  /** True while `session/load` replays the history: those updates are not this attempt's. */
  #replaying = false;
  #promptSent = false;
  /** `agentInfo.name` from its initialize answer: which agent-specific signals it has (see qwen-retries.ts). */
  #agentName: string | null = null;
  readonly #startedAt = Date.now();
  #stopped: Promise<AttemptExit> | null = null;
  readonly #gate: ApprovalGate | null;
  /** Aborted when the attempt is being stopped: a permission request still waiting is answered `cancelled`. */
  readonly #stopping = new AbortController();
  /** The connection and the prompt's outcome, once `run` started them. */
  #connection: acp.ClientConnection | null = null;
  #settled: Promise<unknown> | null = null;

  /** The agent's whole (sealed) environment: where it keeps its files. */
  readonly #env: Record<string, string>;
  /** The runtime's steers, when it gives them (see steering.ts); used only if the agent advertises the extension. */
  readonly #steerable: { channel: SteeringChannel; native: () => void } | null;
  #steering: AcpSteering | null = null;

  constructor(
    agent: AgentProcess,
    options: AcpOptions,
    env: Record<string, string>,
    gate: ApprovalGate | null,
    steerable: { channel: SteeringChannel; native: () => void } | null = null,
  ) {
    this.#agent = agent;
    this.#options = options;
    this.#env = env;
    this.#gate = gate;
    this.#steerable = steerable;
  }

  /** Messages of this session's prompt, in arrival order: the steering holds steers from a tool call's start. */
  #push(messages: CliMessage[]): void {
    this.#steering?.arrived(messages);
    this.#queue.push(messages);
  }

  async *run(signal: AbortSignal | undefined): AsyncGenerator<CliMessage, void, undefined> {
    const connection = this.#connect();
    this.#connection = connection;
    let outcome: Outcome | null = null;
    const settled = this.#converse(connection.agent).then((o) => (outcome = o));
    this.#settled = settled;
    let aborted = false;
    let onAbort: () => void = () => undefined;
    const abortedPromise = new Promise<void>((resolveAbort) => {
      onAbort = () => {
        aborted = true;
        resolveAbort();
      };
    });
    signal?.addEventListener('abort', onAbort, { once: true });
    if (signal?.aborted === true) onAbort();
    try {
      for (;;) {
        // The steering sees each message once the runtime took it: a steer it then sends is logged after it.
        for (const message of this.#queue.take()) {
          yield message;
          this.#steering?.taken(message);
        }
        if (aborted) break;
        if (outcome !== null) break;
        await Promise.race([this.#queue.next(), settled, abortedPromise]);
      }
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
    if (aborted) {
      await this.leave();
      throw signal?.reason;
    }
    this.#stopping.abort();
    // A steer the agent is answering now is told to the runtime (delivered or not) before the attempt's end.
    await this.#steering?.stop(this.#agent.exited);
    for (const message of this.#queue.take()) yield message;
    const ended = outcome as unknown as Outcome;
    const exit = await this.shutdown(EXIT_GRACE_MS);
    connection.close();
    yield* this.#updates.unresolved('the turn ended before the tool finished');
    yield* await this.#agentRetries();
    if (ended.ok && ended.response.stopReason !== 'cancelled') {
      yield completedMessage(ended.response, this.#invalid.list());
      return;
    }
    const facts = ended.ok
      ? {
          text: 'the agent ended its prompt as cancelled, which sessiond did not ask for',
          category: 'unknown' as const,
        }
      : (ended.facts ??
        exitFailure(exit) ?? {
          text: 'the agent closed its output before answering session/prompt',
          category: 'process_crash' as const,
        });
    yield failedMessage(facts, exit, this.#invalid);
  }

  /**
   * The agent's own retries of its model requests, which no ACP agent reports over ACP: read,
   * after its prompt answered, from where the agent records them (Qwen Code's chat file,
   * OpenCode's log), as `agent.retry`s. Other agents: none.
   */
  async #agentRetries(): Promise<CliMessage[]> {
    const sessionId = this.#sessionId;
    if (sessionId === null) return [];
    const env = this.#env;
    if (this.#agentName === QWEN_AGENT_NAME)
      return qwenRetries({ env, cwd: resolve(this.#options.cwd ?? process.cwd()), sessionId, since: this.#startedAt });
    if (this.#agentName === OPENCODE_AGENT_NAME) return opencodeRetries({ env, sessionId, since: this.#startedAt });
    return [];
  }

  /**
   * The attempt stops before its prompt answered: cancelled, or its consumer left the loop (sessiond's steer
   * fallback at a tool boundary, a full log, a quota). ACP's cancel first, for either: the agent ends its prompt
   * (stop reason `cancelled`) and its tools, and records its turn so far, which a resumed session goes on from
   * (qwen 0.24 writes a finished tool's result to its chat file only as its turn goes on: stopped at once, its
   * resumed session had "Tool execution result was not recorded"); up to `cancelGraceMs`, then the stop of the
   * tree. `exitGraceMs`: how long an agent that ended its prompt is given to exit by itself once its stdin is
   * closed (to finish writing its files), as after a prompt it answered. Idempotent; nothing to cancel once the
   * process is being stopped.
   */
  async leave(exitGraceMs = 0): Promise<void> {
    let ended = false;
    if (this.#stopped === null) {
      this.#stopping.abort();
      // A steer being answered is recorded as the agent answers it: one it took is not offered again.
      await this.#steering?.stop(Promise.race([this.#agent.exited, delay(this.#options.cancelGraceMs)]));
      const connection = this.#connection;
      if (connection !== null && this.#sessionId !== null && this.#promptSent && !this.#agentExited()) {
        // Best effort: the stop below kills the process tree if the agent ignores or cannot take the notification.
        void connection.agent.notify('session/cancel', { sessionId: this.#sessionId }).catch(() => undefined);
        ended = await Promise.race([
          (this.#settled ?? Promise.resolve()).then(() => true),
          delay(this.#options.cancelGraceMs).then(() => false),
        ]);
      }
    }
    await this.shutdown(ended ? exitGraceMs : 0);
    this.#connection?.close();
  }

  /** stdin closed, up to `graceMs` to exit by itself, then the tree stopped. Idempotent. */
  shutdown(graceMs: number): Promise<AttemptExit> {
    this.#stopped ??= (async () => {
      const stdin = this.#agent.stdin;
      if (stdin !== null) stdin.end();
      if (graceMs > 0) await Promise.race([this.#agent.exited, delay(graceMs)]);
      await this.#agent.stop(this.#agentExited() ? 'requested' : graceMs > 0 ? 'exit_grace' : 'requested');
      const exit = await this.#agent.exited;
      return { ...exit, stderrTail: this.#agent.stderrTail() };
    })();
    return this.#stopped;
  }

  #exitedFlag = false;
  #agentExited(): boolean {
    return this.#exitedFlag;
  }

  #connect(): acp.ClientConnection {
    void this.#agent.exited.then(() => (this.#exitedFlag = true));
    const { readable, writable } = rpcStreams(this.#agent, this.#invalid);
    const permissionMode = this.#options.permissionMode;
    return acp
      .client({ name: 'sessiond' })
      .onNotification('session/update', ({ params }) => {
        if (this.#replaying || params.sessionId !== this.#sessionId) return;
        this.#push(this.#updates.update(params.update));
        if (this.#promptSent) this.#steering?.live();
      })
      .onRequest('session/request_permission', async ({ params }) => {
        if (permissionMode === 'ask') return this.#ask(params);
        const answer = answerPermission(params, permissionMode);
        const chosen =
          answer.outcome.outcome === 'selected'
            ? params.options.find((o) => o.optionId === (answer.outcome as { optionId: string }).optionId)
            : undefined;
        const allowed = chosen?.kind === 'allow_once' || chosen?.kind === 'allow_always';
        if (params.sessionId === this.#sessionId)
          this.#push(
            this.#updates.permission(
              params.toolCall,
              allowed ? null : `rejected by sessiond (permissionMode ${permissionMode})`,
            ),
          );
        return answer;
      })
      .connect({ readable, writable });
  }

  /**
   * `ask` mode: the request goes to the attempt's approval gate (an operator decides, durably);
   * the agent's silence meanwhile is not idleness. Without a gate nobody can be asked: rejected.
   */
  async #ask(params: acp.RequestPermissionRequest): Promise<acp.RequestPermissionResponse> {
    const own = params.sessionId === this.#sessionId;
    const described = this.#updates.describe(params.toolCall);
    const announced = this.#updates.permission(params.toolCall, null);
    if (own) this.#push(announced);
    if (this.#gate === null) {
      const answer = answerPermission(params, 'reject');
      if (own)
        this.#push(
          this.#updates.permission(
            params.toolCall,
            'rejected by sessiond: permissionMode ask, and nobody to ask outside the durable runtime',
          ),
        );
      return answer;
    }
    const release = this.#agent.holdIdle();
    try {
      const toolCall = params.toolCall;
      const decision = await this.#gate.ask(
        {
          toolCallId: toolCall.toolCallId,
          tool: described.name,
          ...(described.kind === undefined ? {} : { kind: described.kind }),
          arguments: described.arguments,
          options: params.options.map((o) => ({ optionId: o.optionId, name: o.name, kind: o.kind })),
        },
        (message) => this.#queue.push([message]),
        this.#stopping.signal,
      );
      if (decision === null || decision.optionId === null) {
        if (decision !== null && own) this.#push(this.#updates.permission(toolCall, 'denied by the approval decision'));
        return { outcome: { outcome: 'cancelled' } };
      }
      if (decision.outcome === 'denied' && own)
        this.#push(this.#updates.permission(toolCall, 'denied by the approval decision'));
      return { outcome: { outcome: 'selected', optionId: decision.optionId } };
    } finally {
      release();
    }
  }

  /** initialize, the session, the prompt: what the agent answered, or why it did not. */
  async #converse(agent: acp.ClientContext): Promise<Outcome> {
    const cwd = resolve(this.#options.cwd ?? process.cwd());
    let stage = 'initialize';
    try {
      const init = await agent.request('initialize', {
        protocolVersion: acp.PROTOCOL_VERSION,
        // notices: an agent that has them (claude-agent-acp) sends its banners as notices, not as reply text.
        clientCapabilities: {
          fs: { readTextFile: false, writeTextFile: false },
          terminal: false,
          session: { notices: {} },
        },
        clientInfo: { name: 'sessiond', version: '0' },
      });
      this.#agentName = init.agentInfo?.name ?? null;
      // The agent takes steers into its running prompt itself: the runtime leaves them to it (no fallback).
      if (this.#steerable !== null && advertisesSteering(init)) {
        const { channel, native } = this.#steerable;
        this.#steering = new AcpSteering(channel, (steer, meta) =>
          agent.request(STEER_METHOD, {
            sessionId: this.#sessionId ?? '',
            prompt: [{ type: 'text', text: steer.text }],
            _meta: meta,
          }),
        );
        native();
        this.#steering.start();
      }
      const session = this.#options.session;
      if (session.mode === 'resume') {
        const caps = init.agentCapabilities;
        if (caps?.sessionCapabilities?.resume !== undefined && caps.sessionCapabilities.resume !== null) {
          stage = 'session/resume';
          await agent.request('session/resume', { sessionId: session.id, cwd, mcpServers: [] });
          this.#begin('session.resumed', session.id);
        } else if (caps?.loadSession === true) {
          stage = 'session/load';
          this.#replaying = true;
          this.#sessionId = session.id;
          const loaded = await agent.request('session/load', { sessionId: session.id, cwd, mcpServers: [] }).then(
            () => true,
            (error: unknown) => {
              if (!(error instanceof acp.RequestError)) throw error;
              return false;
            },
          );
          // An agent may answer session/load before its replay is written (gemini 0.61 starts it and
          // returns): a round trip after the answer comes back only after what the agent wrote before
          // reading again, the whole replay; an extension method nobody implements does (-32601).
          if (loaded)
            await Promise.race([
              // The expected answer is the -32601 error: any answer, error or not, marks the replay as read.
              agent.request(REPLAY_FENCE_METHOD, {}).catch(() => undefined),
              delay(REPLAY_FENCE_MAX_MS),
            ]);
          this.#replaying = false;
          if (loaded) this.#begin('session.resumed', session.id);
          else {
            // The agent has the capability but could not load this session (gemini 0.61 cannot load
            // any, see the README): the turn runs in a new session, which session.started says.
            this.#sessionId = null;
            stage = 'session/new';
            const created = await agent.request('session/new', { cwd, mcpServers: [] });
            this.#begin('session.started', created.sessionId);
          }
        } else {
          // The agent can neither resume nor load: the turn runs in a new session, without the history.
          stage = 'session/new';
          const created = await agent.request('session/new', { cwd, mcpServers: [] });
          this.#begin('session.started', created.sessionId);
        }
      } else {
        stage = 'session/new';
        const created = await agent.request('session/new', { cwd, mcpServers: [] });
        this.#begin('session.started', created.sessionId);
      }
      stage = 'session/prompt';
      this.#promptSent = true;
      const response = await agent.request('session/prompt', {
        sessionId: this.#sessionId ?? '',
        prompt: [{ type: 'text', text: this.#options.prompt }],
      });
      return { ok: true, response };
    } catch (error) {
      if (error instanceof acp.RequestError) {
        const facts = rpcFailure(error.code, error.message, error.data, stage);
        // An agent that cannot even start a session is not ready to run (bad config, no auth…).
        return {
          ok: false,
          facts: stage === 'initialize' && facts.category === 'unknown' ? { ...facts, category: 'startup' } : facts,
        };
      }
      // The connection closed (the agent exited or closed stdout): its exit decides.
      return { ok: false, facts: null };
    }
  }

  #begin(type: 'session.started' | 'session.resumed', sessionId: string): void {
    this.#sessionId = sessionId;
    this.#queue.push([{ type, content: { sessionId } }]);
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolveDelay) => setTimeout(resolveDelay, ms).unref());
}
