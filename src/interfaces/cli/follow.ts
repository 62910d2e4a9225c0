import { isSettledState } from '../../../machines/states.ts';
import { isSettled, type SessionSummary } from '../../runtime/inspect.ts';
import type { SessionReader } from '../../api/reader.ts';
import type { StoredMessage } from '../../api/types.ts';
import type { WorkerHeartbeat } from '../../runtime/caller/types.ts';
import { hasErrorCode } from '../../errors.ts';
import { colors, formatMs, Spinner } from './present.ts';
import { LiveWorkerCheck, noLiveWorkerReason } from '../../runtime/live-workers.ts';

export interface FollowOptions {
  fromSeq: number;
  json: boolean;
  /** Stop once this turn has ended; `'latest'`: once the latest turn has ended and nothing waits; `'never'`: follow until aborted. */
  until: number | 'latest' | 'never';
  signal: AbortSignal;
  /**
   * The workers' heartbeats (the deployment's `workers()`): while the turn has not ended, the follow
   * says once on stderr when no live worker can take it, and keeps waiting.
   */
  workers?: () => Promise<WorkerHeartbeat[]>;
}

/**
 * Prints a session's messages from `fromSeq` on, live, and returns the summary
 * at the end. JSON mode prints each stored message as one line; otherwise a
 * transcript: assistant text as it streams, thoughts set apart, tool calls with
 * their status, attempt boundaries with the failure category and the backoff.
 */
export async function followSession(session: SessionReader, options: FollowOptions): Promise<SessionSummary | null> {
  const { sessionId } = session;
  const c = colors();
  const spinner = new Spinner();
  const reader = new AbortController();
  const stop = (): void => reader.abort();
  options.signal.addEventListener('abort', stop, { once: true });
  let printed = options.fromSeq - 1;
  let last: SessionSummary | null = null;
  let atLineStart = true;
  const toolArgs = new Map<string, unknown>();
  const out = (text: string): void => {
    if (text === '') return;
    spinner.clear();
    process.stdout.write(text);
    atLineStart = text.endsWith('\n');
  };
  const line = (text: string): void => out(`${atLineStart ? '' : '\n'}${text}\n`);

  // The session as the reader sees it; null once it is gone (deleted while followed).
  const inspect = (): Promise<SessionSummary | null> =>
    session.inspect().catch((error: unknown) => {
      if (hasErrorCode(error, 'not_found')) return null;
      throw error;
    });

  const render = async (m: StoredMessage): Promise<void> => {
    if (options.json) {
      out(`${JSON.stringify({ seq: m.seq, turn: m.turn, attempt: m.attempt, type: m.type, content: m.content })}\n`);
      return;
    }
    const content = (m.content ?? {}) as Record<string, unknown>;
    switch (m.type) {
      case 'session.started':
      case 'session.resumed':
        if (m.attempt === 1) line(c.dim(`── turn ${m.turn}`));
        else line(c.dim(`── turn ${m.turn}, attempt ${m.attempt}`));
        break;
      case 'assistant':
        out(String(content.text ?? ''));
        break;
      case 'assistant.thought':
        line(c.dim(`[thinking] ${String(content.text ?? '')}`));
        break;
      case 'tool.call':
        line(c.cyan(`⚙ ${String(content.name)} …`));
        break;
      case 'tool.update':
        if (!('partialResult' in content)) toolArgs.set(String(content.toolCallId), content.arguments);
        break;
      case 'tool.completed':
        line(
          c.green(
            `✓ ${String(content.name)} ${JSON.stringify(toolArgs.get(String(content.toolCallId)) ?? {})}${resultLine(content.result)}`,
          ),
        );
        break;
      case 'tool.failed':
        line(
          c.red(
            `✗ ${String(content.name)} ${JSON.stringify(toolArgs.get(String(content.toolCallId)) ?? {})}${resultLine(content.error)}`,
          ),
        );
        break;
      case 'approval.requested':
        line(
          c.yellow(
            `? ${String(content.tool)} asks permission (${String(content.requestId)}${content.reasked === true ? ', asked again' : ''}): sessiond approve ${sessionId} ${String(content.requestId)}`,
          ),
        );
        break;
      case 'approval.decided':
        line(
          (content.outcome === 'allowed' ? c.green : c.red)(
            `${content.outcome === 'allowed' ? '✓' : '✗'} ${String(content.requestId)} ${String(content.outcome)} by ${String(content.by)}`,
          ),
        );
        break;
      case 'agent.retry':
        line(c.yellow(`(the agent retried on its own: ${String(content.errorText ?? '')})`));
        break;
      case 'terminal.failed': {
        // The message may be read before the snapshot recording the attempt's outcome: wait for it briefly.
        let attempt: { outcome: string | null; delayMs?: number } | undefined;
        for (let i = 0; i < 20; i++) {
          const view = await inspect();
          attempt = view?.turn?.attempts.find((a) => a.attempt === m.attempt);
          if (attempt === undefined || attempt.outcome !== null) break;
          await new Promise((r) => setTimeout(r, 50));
        }
        const retry = attempt?.delayMs != null ? `; retrying in ${formatMs(attempt.delayMs)}` : '';
        line(
          c.red(
            `── attempt ${m.attempt} failed (${String(content.category)}): ${String(content.text ?? '').split('\n')[0]}${retry}`,
          ),
        );
        break;
      }
      case 'terminal.completed':
        line(c.dim(`── attempt ${m.attempt} completed`));
        break;
      case 'terminal.cancelled':
        line(c.yellow(`── attempt ${m.attempt} cancelled: ${String(content.reason ?? 'cancelled')}`));
        break;
      case 'workspace.undone':
        line(
          c.yellow(
            `── turn ${String(content.turn)} ${content.rollback === true ? 'rolled back' : 'undone'}: the files and conversation are turn ${String(content.to)}'s`,
          ),
        );
        break;
      case 'workspace.not_undone':
        line(c.yellow(`── turn ${String(content.turn)} not taken back: ${String(content.reason)}`));
        break;
      default:
        break;
    }
  };

  const liveness = options.workers === undefined ? null : new LiveWorkerCheck(options.workers);
  /** Says once (again after a worker was seen) that no live worker can take the turn: the rule the library's watch has. */
  const checkWorkers = async (summary: SessionSummary): Promise<void> => {
    const notice = await liveness?.check(summary);
    if (notice == null) return;
    spinner.clear();
    if (notice.kind === 'no_worker_offers_agent')
      process.stderr.write(
        `${c.yellow(`no live worker offers agent ${notice.agent}: turn ${notice.turn} waits for one.`)} The ${notice.workersLive === 1 ? 'live worker runs' : `${notice.workersLive} live workers run`} ${notice.agentsOffered.join(', ') || 'no agent'}. Start a worker that has ${notice.agent} (same REDIS_URL; SESSIOND_WORKER_AGENTS); this waits for it.\n`,
      );
    else
      process.stderr.write(
        `${c.yellow(`no live worker can take turn ${notice.turn}: ${noLiveWorkerReason(notice)}.`)} Start one: sessiond worker (same REDIS_URL); this waits for it.\n`,
      );
  };

  const watcher = (async () => {
    while (!reader.signal.aborted) {
      const view = await inspect();
      if (view !== null) {
        last = view;
        await checkWorkers(last);
        if (!options.json && last.turn !== null) {
          const t = last.turn;
          if (t.status === 'parked' && last.parkedUntil !== undefined)
            spinner.set(
              `turn ${t.index}: parked at a quota wall until ${new Date(last.parkedUntil.until).toISOString()} (sessiond resume ${sessionId} to go on now)`,
            );
          else if (t.status === 'backoff' && last.nextRetryAt !== undefined)
            spinner.set(
              `turn ${t.index}: waiting ${formatMs(Math.max(0, last.nextRetryAt - Date.now()))} before attempt ${t.attempts.length + 1}`,
            );
          else if (last.waitingFor?.reason === 'agent')
            spinner.set(`turn ${t.index}: waiting for a worker offering agent ${last.waitingFor.agent ?? '?'}`);
          else if (t.status === 'running' || t.status === 'queued') spinner.set(`turn ${t.index}: ${t.status}…`);
        }
        if (printed >= last.lastSeq && ended(last, options.until)) {
          reader.abort();
          break;
        }
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  })();

  try {
    for await (const message of session.watch({ from: options.fromSeq, follow: true, signal: reader.signal })) {
      await render(message);
      printed = message.seq;
    }
  } finally {
    reader.abort();
    // The watcher's errors were printed by the follow already; this only waits for it to end.
    await watcher.catch(() => undefined);
    spinner.clear();
    options.signal.removeEventListener('abort', stop);
  }
  if (!options.json && !atLineStart) out('\n');
  if (!options.json && last !== null && (last as SessionSummary).turn !== null) {
    const t = (last as SessionSummary).turn!;
    const reason = t.failureReason ?? t.cancelReason;
    const paint = t.status === 'completed' ? c.green : t.status === 'failed' ? c.red : c.yellow;
    if (ended(last, options.until)) out(`${paint(`turn ${t.index}: ${t.status}`)}${reason ? ` (${reason})` : ''}\n`);
  }
  return last;
}

/** The first line of a tool's text output, if any. */
function resultLine(result: unknown): string {
  const parts = (result as { content?: Array<{ type?: string; text?: string }> } | null)?.content;
  const text = Array.isArray(parts)
    ? parts.map((p) => p.text ?? '').join('')
    : typeof result === 'string'
      ? result
      : '';
  const first = text.trim().split('\n')[0] ?? '';
  return first === '' ? '' : ` → ${first.length > 100 ? `${first.slice(0, 100)}…` : first}`;
}

function ended(summary: SessionSummary, until: FollowOptions['until']): boolean {
  if (until === 'never') return false;
  if (until === 'latest') return isSettled(summary);
  const t = summary.turn;
  if (t === null) return false;
  return t.index > until || (t.index === until && isSettledState(t.status));
}
