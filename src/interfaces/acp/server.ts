import { randomUUID } from 'node:crypto';
import * as acp from '@agentclientprotocol/sdk';
import { admitTurn } from '../../runtime/deployment-policy.ts';
import type { Client } from '../../api/client.ts';
import { runtimeOf } from '../../api/bind.ts';
import type { SessionRecord } from '../../runtime/runtime.ts';
import { ConflictError, InputError, NotFoundError, QuotaError } from '../../errors.ts';
import type { StoredMessage } from '../../runtime/store/session-store.ts';
import { turnPromptsOf } from '../../runtime/turn-prompts.ts';
import { lastAttempts, promptText, updateOf } from './updates.ts';

/** ACP's stop reasons a completed turn may pass on (another one of the agent's reads as end_turn). */
const STOP_REASONS = new Set(['end_turn', 'max_tokens', 'max_turn_requests', 'refusal']);
const TOOL_KINDS = new Set([
  'read',
  'edit',
  'delete',
  'move',
  'search',
  'execute',
  'think',
  'fetch',
  'switch_mode',
  'other',
]);
/** Sessions one connection remembers the options of (an editor opens a few; nothing grows without bound). */
const MAX_SESSIONS = 1000;

export interface AcpServerOptions {
  /** The public client every session operation goes through. */
  client: Client;
  /** The agent and its options from `sessiond acp`'s flags (a client's `_meta.sessiond` may add to them; the policy bounds both). */
  defaults: Record<string, unknown>;
  /** How often a prompt looks for new messages and the turn's end when nothing came. Default 100 ms. */
  pollMs?: number;
  /** `sessiond`'s version, as `initialize` reports it. */
  version?: string;
  /** The tenant of the sessions it creates: the local caller's (config `caller.tenant`; issue 25). */
  tenant?: string;
}

interface Known {
  options: Record<string, unknown>;
  /** A prompt of this connection created it, or it was loaded: later prompts inherit its options. */
  exists: boolean;
}

/**
 * sessiond as an ACP agent: an editor (Zed, any ACP client) drives durable sessions, which any
 * worker of the fleet runs; this process needs only Redis.
 * - `initialize`: loadSession; cancel is ACP's own notification.
 * - `session/new` → a sessiond session id (the session is created by its first prompt), its agent
 *   and options from the flags and the client's `_meta.sessiond` ({agent, options}), the client's
 *   `cwd` unless a flag set one; checked against the deployment policy at once (an invalid-params
 *   error names the field).
 * - `session/prompt` → enqueue, then the turn's stored messages as `session/update`s (see
 *   updates.ts) until the turn ends: completed → its stop reason (`end_turn`), cancelled →
 *   `cancelled`, failed (retries exhausted, not retryable) → a JSON-RPC error with the reason.
 *   An `approval.requested` of the turn goes to the client as `session/request_permission`; its
 *   answer is the approval decision (`by: "acp"`), unless someone decided first.
 * - `session/cancel` → a fleet-wide cancel of the session's turn.
 * - `session/load` → the stored log replayed as updates, in order: each turn's prompt (kept with the
 *   transition that started it, see runtime/turn-prompts.ts) as a `user_message_chunk`, then its last
 *   attempt's messages.
 */
export function serveAcp(options: AcpServerOptions, stream: acp.Stream): acp.AgentConnection {
  const { client: sessiond } = options;
  const pollMs = options.pollMs ?? 100;
  const known = new Map<string, Known>();
  const remember = (id: string, value: Known): void => {
    known.delete(id);
    known.set(id, value);
    if (known.size > MAX_SESSIONS) known.delete(known.keys().next().value as string);
  };
  let closed = false;

  const connection = acp
    .agent({ name: 'sessiond' })
    .onRequest('initialize', () => ({
      protocolVersion: acp.PROTOCOL_VERSION,
      agentCapabilities: { loadSession: true, promptCapabilities: { embeddedContext: true } },
      agentInfo: { name: 'sessiond', version: options.version ?? '0' },
      authMethods: [],
    }))
    .onRequest('session/new', async ({ params }) => {
      const chosen = sessionOptions(options.defaults, params._meta, params.cwd);
      const admitted = await admitTurn(await sessiond.deployment.policy(), chosen);
      if (!admitted.ok)
        throw acp.RequestError.invalidParams(
          { issues: admitted.issues },
          admitted.issues.map((i) => `${i.field}: ${i.message}`).join('; '),
        );
      const sessionId = randomUUID();
      remember(sessionId, { options: chosen, exists: false });
      return { sessionId };
    })
    .onRequest('session/load', async ({ params, client }) => {
      // An unknown or unreadable session is the error thrown just below.
      const view = await recordOf(sessiond, params.sessionId).catch(() => null);
      if (view === null) throw new acp.RequestError(-32002, `unknown session "${params.sessionId}"`);
      remember(params.sessionId, { options: {}, exists: true });
      const messages = lastAttempts(await readAll(sessiond, params.sessionId));
      const prompts = turnPromptsOf(view.history);
      // The current turn's text is in the session's context too (its history entry may be trimmed away).
      const current = view.context?.turn ?? null;
      if (current !== null && !prompts.has(current.index)) prompts.set(current.index, current.text);
      const notify = (update: acp.SessionUpdate) =>
        client.notify('session/update', { sessionId: params.sessionId, update });
      let turn = 0;
      const promptsUpTo = async (last: number): Promise<void> => {
        // Each turn's prompt before its messages; a turn without messages (cancelled before its agent spoke) too.
        for (const index of [...prompts.keys()].filter((t) => t > turn && t <= last).sort((a, b) => a - b))
          await notify({
            sessionUpdate: 'user_message_chunk',
            content: { type: 'text', text: prompts.get(index) ?? '' },
          });
        turn = Math.max(turn, last);
      };
      for (const message of messages) {
        if (message.turn > turn) await promptsUpTo(message.turn);
        const update = updateOf(message);
        if (update !== null) await notify(update);
      }
      await promptsUpTo(Number.MAX_SAFE_INTEGER);
      return {};
    })
    .onNotification('session/cancel', async ({ params }) => {
      // A notification has no answer; a session already ended has nothing to cancel.
      await sessiond
        .session(params.sessionId)
        .cancel('cancelled by the ACP client')
        .catch(() => undefined);
    })
    .onRequest('session/prompt', async ({ params, client }) => {
      const sessionId = params.sessionId;
      const text = promptText(params.prompt);
      if (text.trim() === '') throw acp.RequestError.invalidParams({ field: 'prompt' }, 'prompt: must hold some text');
      const session = known.get(sessionId) ?? (await loadKnown(sessiond, sessionId));
      if (session === null)
        throw new acp.RequestError(-32002, `unknown session "${sessionId}": create it with session/new or load it`);
      // 0 for a session session/new named that has no prompt yet (the raw read: the library's throws not_found).
      const before = await runtimeOf(sessiond).lastSeq(sessionId);
      let turn: number;
      try {
        ({ turn } = await sessiond.sessions.enqueue({
          sessionId,
          prompt: text,
          ...(session.exists ? {} : { options: session.options }),
          ...(options.tenant === undefined ? {} : { tenant: options.tenant }),
        }));
      } catch (error) {
        if (error instanceof InputError) throw acp.RequestError.invalidParams({ issues: error.issues }, error.message);
        if (error instanceof QuotaError || error instanceof ConflictError || error instanceof NotFoundError)
          throw acp.RequestError.internalError(undefined, error.message);
        throw error;
      }
      remember(sessionId, { ...session, exists: true });
      return followTurn({ sessiond, client, sessionId, turn, from: before + 1, pollMs, closed: () => closed });
    })
    .connect(stream);
  void connection.closed.then(() => (closed = true));
  return connection;
}

/** The options of a new session: the flags', the client's `_meta.sessiond` over them, the client's cwd unless the flags name one. */
function sessionOptions(defaults: Record<string, unknown>, meta: unknown, cwd: string): Record<string, unknown> {
  const ours = obj(obj(meta)?.sessiond);
  const fromClient = obj(ours?.options) ?? {};
  return {
    ...(defaults.cwd === undefined ? { cwd } : {}),
    ...fromClient,
    ...defaults,
    ...(typeof ours?.agent === 'string' && defaults.agent === undefined ? { agent: ours.agent } : {}),
  };
}

// Unknown or unreadable: treated as a session that does not exist.
async function loadKnown(sessiond: Client, sessionId: string): Promise<Known | null> {
  // As the comment above says: the ACP client is told the session does not exist.
  const view = await recordOf(sessiond, sessionId).catch(() => null);
  return view === null ? null : { options: {}, exists: true };
}

/** The session as stored, with its machine context (the turn's own state); null when it does not exist. */
function recordOf(sessiond: Client, sessionId: string): Promise<SessionRecord | null> {
  return runtimeOf(sessiond).getSession(sessionId);
}

async function readAll(sessiond: Client, sessionId: string): Promise<StoredMessage[]> {
  const out: StoredMessage[] = [];
  for (let from = 1; ;) {
    const batch = await sessiond.session(sessionId).messages({ from, limit: 1000 });
    if (batch.length === 0) return out;
    out.push(...batch);
    from = (batch.at(-1)?.seq ?? from) + 1;
  }
}

interface Follow {
  sessiond: Client;
  client: acp.AgentContext;
  sessionId: string;
  turn: number;
  from: number;
  pollMs: number;
  closed: () => boolean;
}

/** Streams the turn's messages to the client until the turn has ended and every message of it was sent. */
async function followTurn(f: Follow): Promise<acp.PromptResponse> {
  const { sessiond, client, sessionId, turn } = f;
  const session = sessiond.session(sessionId);
  const asked = new Set<string>();
  let from = f.from;
  let stopReason = 'end_turn';
  for (;;) {
    if (f.closed()) return { stopReason: 'cancelled' };
    const batch = await session.messages({ from, limit: 500 });
    for (const message of batch) {
      from = message.seq + 1;
      if (message.turn !== turn) continue;
      if (message.type === 'approval.requested') void forwardApproval(sessiond, client, sessionId, message, asked);
      if (message.type === 'terminal.completed') {
        const reason = String((message.content as { stopReason?: unknown }).stopReason ?? '');
        stopReason = STOP_REASONS.has(reason) ? reason : 'end_turn';
      }
      const update = updateOf(message);
      if (update !== null) await client.notify('session/update', { sessionId, update });
    }
    if (batch.length > 0) continue;
    const view = await recordOf(sessiond, sessionId);
    const context = view?.context ?? null;
    const ended =
      context !== null &&
      (context.turnIndex > turn ||
        (context.turnIndex === turn && ['completed', 'failed', 'cancelled'].includes(view?.state ?? '')));
    if (view !== null && ended && view.lastSeq < from) {
      const status = context.turn?.index === turn ? context.turn.status : 'completed';
      if (status === 'cancelled') return { stopReason: 'cancelled' };
      if (status === 'failed') {
        const reason =
          context.lastFailure === null
            ? ''
            : `: ${context.lastFailure.category}: ${context.lastFailure.errorText.split('\n')[0]}`;
        throw acp.RequestError.internalError(
          { failureReason: context.turn?.failureReason ?? null, category: context.lastFailure?.category ?? null },
          `the turn failed (${context.turn?.failureReason ?? 'failed'})${reason}`,
        );
      }
      return { stopReason: stopReason as acp.StopReason };
    }
    await new Promise((resolve) => setTimeout(resolve, f.pollMs));
  }
}

/** An agent's permission request, asked of the client; its answer is the approval decision. Never throws. */
async function forwardApproval(
  sessiond: Client,
  client: acp.AgentContext,
  sessionId: string,
  message: StoredMessage,
  asked: Set<string>,
): Promise<void> {
  const c = message.content as {
    requestId: string;
    toolCallId: string;
    tool: string;
    kind?: string;
    arguments: unknown;
    options: Array<{ optionId: string; name: string; kind: string }>;
  };
  if (asked.has(c.requestId)) return;
  asked.add(c.requestId);
  try {
    const answer: acp.RequestPermissionResponse = await client.request('session/request_permission', {
      sessionId,
      toolCall: {
        toolCallId: c.toolCallId,
        title: c.tool,
        status: 'pending',
        rawInput: c.arguments,
        ...(c.kind !== undefined && TOOL_KINDS.has(c.kind) ? { kind: c.kind as acp.ToolKind } : {}),
      },
      options: c.options
        .filter((o) => ['allow_once', 'allow_always', 'reject_once', 'reject_always'].includes(o.kind))
        .map((o) => ({ optionId: o.optionId, name: o.name, kind: o.kind as acp.PermissionOptionKind })),
    });
    const chosen =
      answer.outcome.outcome === 'selected'
        ? c.options.find((o) => o.optionId === (answer.outcome as { optionId: string }).optionId)
        : undefined;
    const verdict = chosen?.kind.startsWith('allow') === true ? 'allow' : 'deny';
    await sessiond.approvals.decide(sessionId, c.requestId, {
      verdict,
      by: 'acp',
      ...(chosen === undefined ? {} : { option: chosen.optionId }),
    });
  } catch {
    // Decided by someone else first, the turn over, or the client gone: nothing to deliver.
  }
}

function obj(value: unknown): Record<string, unknown> | undefined {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}
