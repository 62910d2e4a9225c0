import { z } from 'zod';
import { SESSION_SNAPSHOT_VERSION } from '../../../machines/restore.ts';
import { SESSION_ID_PATTERN } from '../keys.ts';
import { ArchiveError } from '../../errors.ts';
import {
  AGENT_SESSION_ID,
  AGENT_SESSION_ID_RULE,
  ARCHIVE_LIMITS,
  checkAgentLine,
  checkMetaFields,
  checkSnapshotPolicy,
  type ArchiveLimits,
} from './archive-checks.ts';
import {
  Workspace,
  WorkspaceData,
  workspaceBundle,
  workspaceLines,
  type ArchivedWorkspace,
} from './archive-workspace.ts';

export { WORKSPACE_CHUNK_BYTES, type ArchivedWorkspace } from './archive-workspace.ts';

/**
 * The session archive: JSON lines, self-describing and versioned. Line 1 is the header
 * `{"kind":"sessiond.archive","version":1,…}`, then `meta`, `snapshot`, `history`, every `message`
 * (seq, turn, attempt, type, content), `agent` (the agent's session state), for a session with a
 * workspace one `workspace` line (its pointer, the bundle's size and sha256, the number of data lines)
 * and the bundle of its snapshot as base64 `workspace.data` lines, `inbox` (prompts not yet taken),
 * and a last `end` line with the counts, so a truncated archive is told from a whole one.
 */
export const ARCHIVE_VERSION = 1;
export const ARCHIVE_KIND = 'sessiond.archive';

const id = z.string().regex(SESSION_ID_PATTERN, 'must be 1-100 letters, digits or _.-');

const Header = z.strictObject({
  kind: z.literal(ARCHIVE_KIND),
  version: z.number().int(),
  sessionId: id,
  exportedAt: z.number().int().nonnegative(),
});
/** Meta fields an archive carries (the lease, fencing and write bookkeeping stay with the deployment). */
export const ARCHIVED_META = [
  'createdAt',
  'updatedAt',
  'state',
  'prompts',
  'agent',
  'options',
  'policy',
  'retention',
  'usage',
  'usageTurn',
  'usageByModel',
] as const;
const Meta = z.strictObject({
  kind: z.literal('meta'),
  fields: z.strictObject(
    Object.fromEntries(ARCHIVED_META.map((f) => [f, z.string().max(1_000_000).optional()])) as Record<
      (typeof ARCHIVED_META)[number],
      z.ZodOptional<z.ZodString>
    >,
  ),
});
const Snapshot = z.strictObject({
  kind: z.literal('snapshot'),
  value: z
    .object({
      version: z.literal(SESSION_SNAPSHOT_VERSION, {
        error: `the snapshot must be version ${SESSION_SNAPSHOT_VERSION}`,
      }),
      snapshot: z
        .object({
          value: z.unknown(),
          context: z
            .object({
              sessionId: id,
              agentSessionId: z.string().regex(AGENT_SESSION_ID, AGENT_SESSION_ID_RULE).nullable().optional(),
            })
            .loose(),
        })
        .loose(),
    })
    .nullable(),
});
const History = z.strictObject({
  kind: z.literal('history'),
  entry: z.object({ at: z.number(), from: z.string(), to: z.string(), event: z.string() }).loose(),
});
const Message = z.strictObject({
  kind: z.literal('message'),
  seq: z.number().int().positive(),
  turn: z.number().int().nonnegative(),
  attempt: z.number().int().nonnegative(),
  type: z.string().min(1).max(100),
  content: z.unknown(),
});
const Agent = z.strictObject({
  kind: z.literal('agent'),
  field: z.string().regex(/^[a-z][a-z-]{0,30}:[A-Za-z0-9_.:-]{1,200}$/, 'must be <agent>:<agent session id>'),
  value: z.string(),
});
const Inbox = z.strictObject({
  kind: z.literal('inbox'),
  prompt: z.strictObject({
    id: z.string().min(1).max(200),
    text: z.string(),
    options: z.record(z.string(), z.unknown()),
    enqueuedAt: z.number(),
    retryOf: z.number().int().positive().optional(),
  }),
});
const End = z.strictObject({
  kind: z.literal('end'),
  messages: z.number().int().nonnegative(),
  history: z.number().int().nonnegative(),
  agent: z.number().int().nonnegative(),
  inbox: z.number().int().nonnegative(),
});

export interface Archive {
  sessionId: string;
  exportedAt: number;
  meta: Partial<Record<(typeof ARCHIVED_META)[number], string>>;
  /** The persisted session ({version, snapshot}), null for a session no worker has taken yet. */
  snapshot: {
    version: number;
    snapshot: { context: { sessionId: string } & Record<string, unknown> } & Record<string, unknown>;
  } | null;
  history: unknown[];
  messages: Array<{ seq: number; turn: number; attempt: number; type: string; content: unknown }>;
  agent: Array<[string, string]>;
  inbox: Array<{ id: string; text: string; options: Record<string, unknown>; enqueuedAt: number; retryOf?: number }>;
  /** The session's workspace (absent: it has none): its pointer and the git bundle of the pointer's snapshot. */
  workspace?: ArchivedWorkspace;
}

/** An archive that cannot be imported; `line` names where (1-based), nothing was written. */
/** Defined with every other error of sessiond in src/errors.ts. */
export { ArchiveError };

export function writeArchive(archive: Archive): string {
  const lines: unknown[] = [
    { kind: ARCHIVE_KIND, version: ARCHIVE_VERSION, sessionId: archive.sessionId, exportedAt: archive.exportedAt },
    { kind: 'meta', fields: archive.meta },
    { kind: 'snapshot', value: archive.snapshot },
    ...archive.history.map((entry) => ({ kind: 'history', entry })),
    ...archive.messages.map((m) => ({ kind: 'message', ...m })),
    ...archive.agent.map(([field, value]) => ({ kind: 'agent', field, value })),
    ...workspaceLines(archive.workspace),
    ...archive.inbox.map((prompt) => ({ kind: 'inbox', prompt })),
    {
      kind: 'end',
      messages: archive.messages.length,
      history: archive.history.length,
      agent: archive.agent.length,
      inbox: archive.inbox.length,
    },
  ];
  return lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
}

function issue(error: z.ZodError): string {
  const first = error.issues[0];
  if (first === undefined) return 'invalid';
  return `${first.path.length === 0 ? '' : `${first.path.join('.')}: `}${first.message}`;
}

/**
 * Parses and checks a whole archive (nothing is written by this). Throws ArchiveError naming the line.
 * Beyond the shape of each line, every field is checked as a caller's would be (archive-checks.ts):
 * the retry policy by its schema, the agent state by its agent's rules and against the snapshot,
 * the sizes against `limits`.
 */
export function readArchive(text: string, limits: ArchiveLimits = ARCHIVE_LIMITS): Archive {
  const size = Buffer.byteLength(text, 'utf8');
  if (size > limits.maxArchiveBytes)
    throw new ArchiveError(
      `the archive is ${size} bytes, above this deployment's limit of ${limits.maxArchiveBytes} (lifecycle.maxArchiveBytes)`,
    );
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  if (lines.length === 0) throw new ArchiveError('empty: not a sessiond archive');
  const parse = (i: number): unknown => {
    const bytes = Buffer.byteLength(lines[i] as string, 'utf8');
    if (bytes > limits.maxArchiveLineBytes)
      throw new ArchiveError(
        `the line is ${bytes} bytes, above this deployment's limit of ${limits.maxArchiveLineBytes} per line (lifecycle.maxArchiveLineBytes)`,
        i + 1,
      );
    try {
      return JSON.parse(lines[i] as string) as unknown;
    } catch {
      throw new ArchiveError('not JSON (a truncated or corrupted archive?)', i + 1);
    }
  };
  const head = parse(0) as { kind?: unknown; version?: unknown };
  if (head === null || typeof head !== 'object' || head.kind !== ARCHIVE_KIND)
    throw new ArchiveError(`not a sessiond archive (the first line must have "kind":"${ARCHIVE_KIND}")`, 1);
  if (head.version !== ARCHIVE_VERSION)
    throw new ArchiveError(
      `version ${JSON.stringify(head.version)} is not supported (this build reads version ${ARCHIVE_VERSION}${typeof head.version === 'number' && head.version > ARCHIVE_VERSION ? '; it was written by a newer sessiond' : ''})`,
      1,
    );
  const header = Header.safeParse(head);
  if (!header.success) throw new ArchiveError(issue(header.error), 1);
  const archive: Archive = {
    sessionId: header.data.sessionId,
    exportedAt: header.data.exportedAt,
    meta: {},
    snapshot: null,
    history: [],
    messages: [],
    agent: [],
    inbox: [],
  };
  const order = ['meta', 'snapshot', 'history', 'message', 'agent', 'workspace', 'workspace.data', 'inbox', 'end'];
  let at = 0;
  let ended = false;
  const schemas = {
    meta: Meta,
    snapshot: Snapshot,
    history: History,
    message: Message,
    agent: Agent,
    workspace: Workspace,
    'workspace.data': WorkspaceData,
    inbox: Inbox,
    end: End,
  } as const;
  // The workspace's bundle as its data lines are read: checked whole once they end.
  let workspace: { line: number; declared: z.infer<typeof Workspace>; chunks: Buffer[]; bytes: number } | null = null;
  let workspaceDone = false;
  for (let i = 1; i < lines.length; i += 1) {
    if (ended) throw new ArchiveError('a line after the end line', i + 1);
    const raw = parse(i) as { kind?: unknown };
    const kind = typeof raw === 'object' && raw !== null && typeof raw.kind === 'string' ? raw.kind : null;
    const position = kind === null ? -1 : order.indexOf(kind);
    if (kind === null || position === -1)
      throw new ArchiveError(`unknown line kind ${JSON.stringify(kind)} (one of ${order.join(', ')})`, i + 1);
    if (i === 1 && kind !== 'meta') throw new ArchiveError('the second line must be the meta line', i + 1);
    if (i === 2 && kind !== 'snapshot') throw new ArchiveError('the third line must be the snapshot line', i + 1);
    if (i > 2 && (kind === 'meta' || kind === 'snapshot')) throw new ArchiveError(`a second ${kind} line`, i + 1);
    if (position < at)
      throw new ArchiveError(`a "${kind}" line out of order (the order is ${order.join(', ')})`, i + 1);
    at = position;
    if (kind === 'workspace' && workspace !== null) throw new ArchiveError('a second workspace line', i + 1);
    if (workspace !== null && !workspaceDone && kind !== 'workspace.data') {
      archive.workspace = workspaceBundle(workspace, i);
      workspaceDone = true;
    }
    const parsed = schemas[kind as keyof typeof schemas].safeParse(raw);
    if (!parsed.success) throw new ArchiveError(`${kind}: ${issue(parsed.error)}`, i + 1);
    const line = parsed.data;
    if (line.kind === 'meta') archive.meta = checked(() => checkMetaFields(line.fields), 'meta', i);
    else if (line.kind === 'snapshot') {
      archive.snapshot = line.value as Archive['snapshot'];
      checked(() => checkSnapshotPolicy(archive.snapshot?.snapshot.context.policy), 'snapshot', i);
    } else if (line.kind === 'history') archive.history.push(line.entry);
    else if (line.kind === 'message') {
      const expected = archive.messages.length + 1;
      if (line.seq !== expected)
        throw new ArchiveError(
          `message seq ${line.seq} where ${expected} was expected (the log must be whole, in order)`,
          i + 1,
        );
      archive.messages.push({
        seq: line.seq,
        turn: line.turn,
        attempt: line.attempt,
        type: line.type,
        content: line.content,
      });
    } else if (line.kind === 'agent') {
      const snapshotId = archive.snapshot?.snapshot.context.agentSessionId;
      checked(
        () =>
          checkAgentLine(
            line.field,
            line.value,
            agentSessions(archive),
            typeof snapshotId === 'string' ? snapshotId : null,
          ),
        'agent',
        i,
      );
      archive.agent.push([line.field, line.value]);
    } else if (line.kind === 'workspace') {
      if (line.bytes > limits.maxArchiveBytes)
        throw new ArchiveError(
          `workspace: bytes: ${line.bytes} is above this deployment's limit of ${limits.maxArchiveBytes} (lifecycle.maxArchiveBytes)`,
          i + 1,
        );
      const agentSessionId = line.pointer.agentSessionId;
      if (agentSessionId !== null && !agentSessions(archive).has(agentSessionId))
        throw new ArchiveError(
          `workspace: pointer.agentSessionId: agent session ${JSON.stringify(agentSessionId)} does not match the snapshot: it is neither the snapshot's nor one the session's log started`,
          i + 1,
        );
      workspace = { line: i + 1, declared: line, chunks: [], bytes: 0 };
    } else if (line.kind === 'workspace.data') {
      if (workspace === null)
        throw new ArchiveError('workspace.data: a data line without a workspace line before it', i + 1);
      const expected = workspace.chunks.length + 1;
      if (line.part !== expected)
        throw new ArchiveError(
          `workspace.data: part ${line.part} where ${expected} was expected (the data lines must be whole, in order)`,
          i + 1,
        );
      if (line.part > workspace.declared.parts)
        throw new ArchiveError(
          `workspace.data: part ${line.part}, the workspace line (line ${workspace.line}) says ${workspace.declared.parts} parts`,
          i + 1,
        );
      const chunk = Buffer.from(line.data, 'base64');
      workspace.bytes += chunk.length;
      if (workspace.bytes > workspace.declared.bytes)
        throw new ArchiveError(
          `workspace.data: the data lines hold more than the ${workspace.declared.bytes} bytes the workspace line (line ${workspace.line}) says`,
          i + 1,
        );
      workspace.chunks.push(chunk);
    } else if (line.kind === 'inbox') archive.inbox.push(line.prompt);
    else {
      const counts = {
        messages: archive.messages.length,
        history: archive.history.length,
        agent: archive.agent.length,
        inbox: archive.inbox.length,
      };
      for (const [name, n] of Object.entries(counts)) {
        if (line[name as keyof typeof counts] !== n)
          throw new ArchiveError(
            `the end line counts ${line[name as keyof typeof counts]} ${name} lines, the archive has ${n} (truncated?)`,
            i + 1,
          );
      }
      ended = true;
    }
  }
  if (!ended) throw new ArchiveError('no end line: the archive is truncated');
  if (archive.snapshot !== null && archive.snapshot.snapshot.context.sessionId !== archive.sessionId)
    throw new ArchiveError(
      `the snapshot is of session "${archive.snapshot.snapshot.context.sessionId}", the header says "${archive.sessionId}"`,
    );
  return archive;
}

/** Runs a check of archive-checks.ts on line i (0-based): its error becomes the archive's, naming the line. */
function checked<T>(check: () => T, kind: string, i: number): T {
  try {
    return check();
  } catch (error) {
    throw new ArchiveError(`${kind}: ${(error as Error).message}`, i + 1);
  }
}

/** The agent sessions the archive's session had: the snapshot's, and those its log reports started or resumed. */
function agentSessions(archive: Archive): Set<string> {
  const ids = new Set<string>();
  const current = archive.snapshot?.snapshot.context.agentSessionId;
  if (typeof current === 'string') ids.add(current);
  for (const m of archive.messages) {
    if (m.type !== 'session.started' && m.type !== 'session.resumed') continue;
    const id = (m.content as { sessionId?: unknown } | null)?.sessionId;
    if (typeof id === 'string') ids.add(id);
  }
  return ids;
}
