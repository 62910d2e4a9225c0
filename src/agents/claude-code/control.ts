import type { SpawnSpec } from '../../process/index.ts';
import type { ApprovalOption, CliMessage } from '../../protocol/index.ts';
import type { ApprovalAnswer, ApprovalGate } from '../shared/approval-gate.ts';
import {
  EXIT_GRACE_MS,
  spawnForAttempt,
  startupFailure,
  type FinishingMapper,
  type RunContext,
} from '../shared/run-attempt.ts';

/**
 * What sessiond offers an operator for one of Claude Code's permission prompts: allow this one
 * tool use, or deny it. (Claude Code's "always allow" suggestions would change its settings; not offered.)
 */
export const CLAUDE_APPROVAL_OPTIONS: readonly ApprovalOption[] = [
  { optionId: 'allow_once', name: 'Allow once', kind: 'allow_once' },
  { optionId: 'reject_once', name: 'Deny', kind: 'reject_once' },
];

/** Claude Code's tools by the ACP kind an `approvals.autoAllow` rule can name. */
const TOOL_KINDS: Readonly<Record<string, string>> = {
  Bash: 'execute',
  BashOutput: 'execute',
  KillShell: 'execute',
  Edit: 'edit',
  MultiEdit: 'edit',
  Write: 'edit',
  NotebookEdit: 'edit',
  Read: 'read',
  Glob: 'search',
  Grep: 'search',
  WebFetch: 'fetch',
  WebSearch: 'fetch',
};

/** A `control_request` of subtype `can_use_tool`, as Claude Code 2.1.332 writes it on stdout. */
interface CanUseTool {
  requestId: string;
  toolName: string;
  toolUseId: string;
  input: Record<string, unknown>;
}

type ControlLine =
  | { kind: 'can_use_tool'; request: CanUseTool }
  | { kind: 'other_request'; requestId: string; subtype: string }
  | { kind: 'cancel'; requestId: string }
  | { kind: 'ignored' };

/**
 * Reads one stdout line as a line of Claude Code's control protocol (`control_request`,
 * `control_cancel_request`, `control_response`), or `null` when it is one of its ordinary events
 * (for the mapper). Pure.
 */
export function readControlLine(line: string): ControlLine | null {
  if (!line.includes('"control_')) return null;
  let event: unknown;
  try {
    event = JSON.parse(line);
  } catch {
    // Not JSON: not a control message (the mapper reports invalid lines).
    return null;
  }
  if (event === null || typeof event !== 'object' || Array.isArray(event)) return null;
  const e = event as Record<string, unknown>;
  if (e.type === 'control_cancel_request')
    return typeof e.request_id === 'string' ? { kind: 'cancel', requestId: e.request_id } : { kind: 'ignored' };
  if (e.type === 'control_response') return { kind: 'ignored' };
  if (e.type !== 'control_request') return null;
  const requestId = typeof e.request_id === 'string' ? e.request_id : '';
  const request = e.request !== null && typeof e.request === 'object' ? (e.request as Record<string, unknown>) : {};
  if (requestId === '') return { kind: 'ignored' };
  if (request.subtype !== 'can_use_tool')
    return { kind: 'other_request', requestId, subtype: typeof request.subtype === 'string' ? request.subtype : '' };
  const input =
    request.input !== null && typeof request.input === 'object' && !Array.isArray(request.input)
      ? (request.input as Record<string, unknown>)
      : {};
  return {
    kind: 'can_use_tool',
    request: {
      requestId,
      toolName: typeof request.tool_name === 'string' ? request.tool_name : '',
      toolUseId: typeof request.tool_use_id === 'string' ? request.tool_use_id : '',
      input,
    },
  };
}

/** The user message that carries the prompt (`--input-format stream-json`), one line. */
export function userMessageLine(prompt: string): string {
  return `${JSON.stringify({ type: 'user', session_id: '', message: { role: 'user', content: [{ type: 'text', text: prompt }] }, parent_tool_use_id: null })}\n`;
}

/** The `control_response` for a permission prompt: allowed (the input unchanged) or denied with a reason for the model. */
export function permissionResponseLine(request: CanUseTool, answer: ApprovalAnswer): string {
  const response =
    answer.outcome === 'allowed'
      ? { behavior: 'allow', updatedInput: request.input, toolUseID: request.toolUseId }
      : {
          behavior: 'deny',
          message: 'The operator denied this tool use (sessiond approval).',
          toolUseID: request.toolUseId,
        };
  return `${JSON.stringify({ type: 'control_response', response: { subtype: 'success', request_id: request.requestId, response } })}\n`;
}

/** The answer to a control request sessiond does not serve (Claude Code sends none without an `initialize`). */
function errorResponseLine(requestId: string, subtype: string): string {
  return `${JSON.stringify({ type: 'control_response', response: { subtype: 'error', request_id: requestId, error: `sessiond does not handle control requests of subtype "${subtype}"` } })}\n`;
}

/** Wakes the attempt's loop when a permission prompt emitted messages while stdout was quiet. */
class Wakeup {
  #promise: Promise<void> | null = null;
  #resolve: (() => void) | null = null;

  wait(): Promise<void> {
    this.#promise ??= new Promise<void>((resolve) => (this.#resolve = resolve));
    return this.#promise;
  }

  fire(): void {
    const resolve = this.#resolve;
    this.#promise = null;
    this.#resolve = null;
    resolve?.();
  }
}

type Next = { kind: 'line'; result: IteratorResult<string> } | { kind: 'wake' } | { kind: 'abort' };

/**
 * One attempt of Claude Code whose permission prompts an operator answers: `-p --input-format
 * stream-json --permission-prompt-tool stdio` (see options.ts). The prompt goes in as one
 * stream-json user message on stdin, which stays open while the attempt runs: each
 * `control_request` `can_use_tool` Claude Code writes goes to the attempt's approval gate
 * (`approval.requested`, then `approval.decided` once an operator, a policy rule or the deadline
 * decided) and its answer goes back as the `control_response` (allow with the input unchanged,
 * or deny with a message for the model). Meanwhile the agent's silence is not idleness. Every
 * other line goes to the mapper. stdin is closed (EOF) once the `result` event arrives (Claude
 * Code then exits; EXIT_GRACE_MS later it is stopped) or when the attempt is stopped.
 *
 * Contract: as runAgentAttempt (shared/run-attempt.ts): yields the attempt's messages and ends
 * with exactly one terminal message; a failure to start is a `startup` terminal; however the
 * attempt ends, no process of its tree is left. When the caller's signal aborts, a prompt still
 * waiting gets no answer (it stays pending for the next activation, see the gate), the tree is
 * stopped (the three-stage stop) and the iterator rejects with the abort reason.
 */
export async function* runClaudeCodeAsking(
  spec: SpawnSpec,
  prompt: string,
  mapper: FinishingMapper,
  gate: ApprovalGate,
  context: RunContext,
): AsyncGenerator<CliMessage, void, undefined> {
  const { signal } = context;
  const spawned = await spawnForAttempt({ ...spec, stdinMode: 'pipe' }, context);
  if (!spawned.ok) {
    yield* startupFailure(mapper, spawned.error);
    return;
  }
  const agent = spawned.agent;
  const stdin = agent.stdin;
  const write = (line: string): void => {
    if (stdin !== null && stdin.writable) stdin.write(line, () => undefined);
  };
  const closeStdin = (): void => {
    if (stdin !== null && stdin.writable) stdin.end();
  };
  write(userMessageLine(prompt));

  const queue: CliMessage[] = [];
  const wakeup = new Wakeup();
  const emit = (message: CliMessage): void => {
    queue.push(message);
    wakeup.fire();
  };
  /** Aborted once the attempt is being stopped or Claude Code's output ended: a waiting prompt gets no answer. */
  const stopping = new AbortController();
  /** Prompts waiting for a decision, by Claude Code's request id (a `control_cancel_request` withdraws one). */
  const asking = new Map<string, AbortController>();
  const pending = new Set<Promise<void>>();

  const ask = async (request: CanUseTool): Promise<void> => {
    if (asking.has(request.requestId)) return;
    const withdrawn = new AbortController();
    asking.set(request.requestId, withdrawn);
    const release = agent.holdIdle();
    try {
      const kind = TOOL_KINDS[request.toolName];
      const answer = await gate.ask(
        {
          toolCallId: request.toolUseId,
          tool: request.toolName,
          ...(kind === undefined ? {} : { kind }),
          arguments: request.input,
          options: [...CLAUDE_APPROVAL_OPTIONS],
        },
        emit,
        AbortSignal.any([stopping.signal, withdrawn.signal]),
      );
      if (answer !== null && !withdrawn.signal.aborted && !stopping.signal.aborted)
        write(permissionResponseLine(request, answer));
    } finally {
      release();
      asking.delete(request.requestId);
    }
  };

  let aborted = false;
  let onAbort: () => void = () => undefined;
  const abortedPromise = new Promise<Next>((resolve) => {
    onAbort = () => {
      aborted = true;
      resolve({ kind: 'abort' });
    };
  });
  signal?.addEventListener('abort', onAbort, { once: true });
  if (signal?.aborted === true) onAbort();
  const lines = agent.lines()[Symbol.asyncIterator]();
  let nextLine: Promise<Next> = lines.next().then((result) => ({ kind: 'line', result }));
  let graceTimer: NodeJS.Timeout | undefined;
  try {
    for (;;) {
      if (queue.length > 0) yield* queue.splice(0);
      if (aborted) break;
      const next = await Promise.race([nextLine, wakeup.wait().then((): Next => ({ kind: 'wake' })), abortedPromise]);
      if (next.kind !== 'line') continue;
      if (next.result.done === true) break;
      nextLine = lines.next().then((result) => ({ kind: 'line', result }));
      const line = next.result.value;
      const control = readControlLine(line);
      if (control === null) {
        queue.push(...mapper.push(line));
        clearTimeout(graceTimer);
        if (mapper.agentEnded) {
          // The turn is over: EOF tells Claude Code there is nothing more to say; it exits.
          closeStdin();
          graceTimer = setTimeout(() => void agent.stop('exit_grace'), EXIT_GRACE_MS);
        }
      } else if (control.kind === 'can_use_tool') {
        const task = ask(control.request).finally(() => pending.delete(task));
        pending.add(task);
      } else if (control.kind === 'cancel') {
        asking.get(control.requestId)?.abort();
      } else if (control.kind === 'other_request') {
        write(errorResponseLine(control.requestId, control.subtype));
      }
    }
    stopping.abort();
    if (aborted) {
      // The three-stage stop interrupts first (SIGINT, as without asking); stdin closes with it.
      const stopped = agent.stop('requested');
      closeStdin();
      await stopped;
      await Promise.allSettled([...pending]);
      throw signal?.reason;
    }
    closeStdin();
    const exit = await agent.exited;
    clearTimeout(graceTimer);
    // A gate still answering a withdrawn prompt may emit its last messages: they come before the terminal.
    await Promise.allSettled([...pending]);
    if (queue.length > 0) yield* queue.splice(0);
    yield* mapper.complete({ ...exit, stderrTail: agent.stderrTail() });
  } finally {
    clearTimeout(graceTimer);
    signal?.removeEventListener('abort', onAbort);
    stopping.abort();
    closeStdin();
    await agent.stop('requested');
  }
}
