import { createHash } from 'node:crypto';
import { z } from 'zod';
import { ArchiveError } from '../../errors.ts';
import type { WorkspacePointer } from '../session-loop/workspace-attempt.ts';
import { AGENT_SESSION_ID, AGENT_SESSION_ID_RULE } from './archive-checks.ts';

// An archive's workspace (archive.ts): one `workspace` line (the pointer, the bundle's size, sha256 and
// number of data lines), then the git bundle as base64 `workspace.data` lines; written and checked here.

/** Raw bundle bytes per `workspace.data` line: 1 MiB of base64. */
export const WORKSPACE_CHUNK_BYTES = 768 * 1024;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const Pointer = z.strictObject({
  version: z.literal(1, { error: 'the pointer must be version 1' }),
  snapshot: z.string().regex(/^(?:[0-9a-f]{40}|[0-9a-f]{64})$/, 'must be a snapshot id (40 or 64 hex digits)'),
  label: z.string().max(200),
  at: z.number().int().nonnegative(),
  turn: z.number().int().nonnegative(),
  attempt: z.number().int().nonnegative(),
  agentSessionId: z.string().regex(AGENT_SESSION_ID, AGENT_SESSION_ID_RULE).nullable(),
  promptRecorded: z.boolean(),
});
export const Workspace = z.strictObject({
  kind: z.literal('workspace'),
  pointer: Pointer,
  bytes: z.number().int().positive(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 hex digits'),
  parts: z.number().int().positive(),
});
export const WorkspaceData = z.strictObject({
  kind: z.literal('workspace.data'),
  part: z.number().int().positive(),
  data: z.string().min(1).regex(BASE64, 'must be base64'),
});
export interface ArchivedWorkspace {
  pointer: WorkspacePointer;
  bundle: Buffer;
  /** The `workspace` line (1-based; read archives only): import errors about the workspace name it. */
  line?: number;
}

export function workspaceLines(workspace: ArchivedWorkspace | undefined): unknown[] {
  if (workspace === undefined) return [];
  const { bundle } = workspace;
  const parts = Math.ceil(bundle.length / WORKSPACE_CHUNK_BYTES);
  return [
    {
      kind: 'workspace',
      pointer: workspace.pointer,
      bytes: bundle.length,
      sha256: createHash('sha256').update(bundle).digest('hex'),
      parts,
    },
    ...Array.from({ length: parts }, (_, i) => ({
      kind: 'workspace.data',
      part: i + 1,
      data: bundle.subarray(i * WORKSPACE_CHUNK_BYTES, (i + 1) * WORKSPACE_CHUNK_BYTES).toString('base64'),
    })),
  ];
}

/**
 * The bundle of a workspace whose data lines ended before line i (0-based): all its parts, of the
 * size and sha256 its workspace line says, else an ArchiveError naming the line at fault.
 */
export function workspaceBundle(
  workspace: {
    line: number;
    declared: { pointer: WorkspacePointer; bytes: number; sha256: string; parts: number };
    chunks: Buffer[];
    bytes: number;
  },
  i: number,
): ArchivedWorkspace {
  const { declared, chunks, line } = workspace;
  if (chunks.length !== declared.parts)
    throw new ArchiveError(
      `workspace.data: ${chunks.length} of the ${declared.parts} data lines the workspace line (line ${line}) says (truncated?)`,
      i + 1,
    );
  const bundle = Buffer.concat(chunks);
  if (bundle.length !== declared.bytes)
    throw new ArchiveError(
      `workspace: the data lines hold ${bundle.length} bytes, the workspace line says ${declared.bytes} (truncated?)`,
      line,
    );
  const sha256 = createHash('sha256').update(bundle).digest('hex');
  if (sha256 !== declared.sha256)
    throw new ArchiveError(
      `workspace: the data lines' sha256 is ${sha256}, the workspace line says ${declared.sha256} (a corrupted archive?)`,
      line,
    );
  return { pointer: declared.pointer, bundle, line };
}
