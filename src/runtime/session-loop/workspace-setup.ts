import { terminalFailed, type CliMessage, type MessageOf } from '../../protocol/index.ts';
import { WorkspaceQuotaError, type Workspaces, type WorkspaceSource } from '../../workspace/types.ts';
import type { SessionWriter } from '../session-writer.ts';
import type { WarnLog } from './config.ts';
import { quotaMessage, type AttemptWorkspace } from './workspace-attempt.ts';

export interface AttemptSetup {
  /** The caller options the agent runs with (in a workspace: its path as cwd; never `workspace`). */
  options: Record<string, unknown>;
  /** This attempt's workspaces (null: the session runs in a cwd, as before workspaces). */
  workspaces: Workspaces | null;
  /** The repository a new workspace starts from. */
  source: WorkspaceSource | undefined;
  /** The attempt cannot run here: its terminal message. */
  refused: MessageOf<'terminal.failed'> | null;
}

/**
 * Where an attempt runs: a session whose caller named a cwd runs there (not portable, not
 * transactional); any other gets its workspace when this worker has workspaces, else the
 * deployment's `workspace` (as before workspaces).
 */
export function attemptSetup(
  workspaces: Workspaces | null,
  sessionId: string,
  stored: Readonly<Record<string, unknown>>,
  admitted: Readonly<Record<string, unknown>>,
): AttemptSetup {
  const { workspace: asked, ...options } = admitted;
  const source = asked as WorkspaceSource | undefined;
  if (stored.cwd !== undefined) return { options, workspaces: null, source: undefined, refused: null };
  if (workspaces === null) {
    if (source === undefined) return { options, workspaces: null, source: undefined, refused: null };
    return {
      options,
      workspaces: null,
      source,
      refused: terminalFailed(
        'options.workspace: this worker runs no workspaces (workspaces.enabled is off, SESSIOND_WORKSPACES_ENABLED)',
        'bad_request',
      ),
    };
  }
  return { options: { ...options, cwd: workspaces.path(sessionId) }, workspaces, source, refused: null };
}

/** What git prints when the store (or a source repository) could not be reached, as opposed to refused. */
const UNREACHABLE =
  /could not read from remote repository|unable to access|connection refused|connection timed out|could not resolve host|network is unreachable|no route to host|the remote end hung up|early eof/i;

/**
 * The workspace could not be prepared: the attempt does not start. A store or source that could not
 * be reached is a `network` failure (the default retry policy tries again); anything else (a
 * snapshot the store does not have, a clone refused) is `startup`.
 */
export function workspaceStartFailed(error: unknown): MessageOf<'terminal.failed'> {
  const text = error instanceof Error ? error.message : String(error);
  return terminalFailed(
    `the session's workspace could not be prepared: ${text}`,
    UNREACHABLE.test(text) ? 'network' : 'startup',
  );
}

export type Recorded =
  | { kind: 'none' }
  | { kind: 'replace'; message: CliMessage }
  | { kind: 'quota'; message: CliMessage }
  /** The completed end, taken: `record` queues it, to be called with the terminal.completed's write only. */
  | { kind: 'answer'; record: () => void };

/**
 * What a message of the agent records in its workspace: a tool call's end records the files and
 * the conversation up to its result; the attempt's completed end takes both whole, to be recorded
 * with its terminal message (over quota, the completed terminal becomes a `quota` failure). A
 * snapshot that fails otherwise is logged and the attempt goes on (the next recorded point holds
 * that tool's effects too).
 */
export async function recordInWorkspace(
  workspace: AttemptWorkspace,
  message: CliMessage,
  agentSessionId: string | null,
  signal: AbortSignal,
  warn: WarnLog,
): Promise<Recorded> {
  if (message.type === 'tool.call') workspace.toolCalled(message.content.toolCallId);
  const tool = message.type === 'tool.completed' || message.type === 'tool.failed';
  const completed = message.type === 'terminal.completed';
  if ((!tool && !completed) || signal.aborted) return { kind: 'none' };
  try {
    if (!tool) return { kind: 'answer', record: await workspace.completed(agentSessionId) };
    await workspace.toolEnded(message.content.toolCallId, agentSessionId, signal);
    return { kind: 'none' };
  } catch (error) {
    if (error instanceof WorkspaceQuotaError) {
      const stopped = quotaMessage(error);
      return completed ? { kind: 'replace', message: stopped } : { kind: 'quota', message: stopped };
    }
    if (completed) {
      warn("the completed attempt's workspace was not recorded: the turn fails", error);
      return {
        kind: 'replace',
        message: terminalFailed(
          `the workspace was not recorded at the end of the attempt: ${(error as Error).message}`,
          'unknown',
        ),
      };
    }
    warn('a snapshot after a tool call failed (the next one records its effects)', error);
    return { kind: 'none' };
  }
}

/**
 * The attempt did not complete: the host's copy goes back to the latest recorded point (failed
 * with `rollback`: to the attempt's start), and the terminal message says whether the recorded
 * conversation holds the prompt. Not once the lease is lost (the session is another holder's).
 */
export async function abandonWith<M extends CliMessage | null>(
  workspace: AttemptWorkspace,
  terminal: M,
  writer: SessionWriter,
  failed: boolean,
  warn: WarnLog,
): Promise<M> {
  if (writer.failure !== null) return terminal;
  let recorded: boolean;
  try {
    recorded = await workspace.abandon({ failed });
  } catch (error) {
    // The copy is then not known to be at a snapshot: the next attempt's prepare restores it.
    warn("the workspace was not put back after the attempt (the next attempt's prepare restores it)", error);
    recorded = workspace.recordedPrompt;
  }
  if (terminal === null || terminal.type !== 'terminal.failed') return terminal;
  return { ...terminal, content: { ...terminal.content, promptRecorded: recorded } } as M;
}
