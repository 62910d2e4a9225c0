import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  readArchive,
  WORKSPACE_CHUNK_BYTES,
  writeArchive,
  type Archive,
} from '../../../src/runtime/lifecycle/archive.ts';

/**
 * An archive's workspace lines (pure logic: the round trip through a real store, a worker and real
 * pi is in workspace-transfer.test.ts): the bundle comes back byte for byte; any damage to it is
 * refused by readArchive, naming the line, before an import writes anything.
 */

const ID = '0b9e0c3e-1111-4a4a-9b9b-000000000001';
const OTHER = '7f7f7f7f-2222-4b4b-8c8c-000000000002';
const SNAPSHOT = 'a'.repeat(40);

function archive(bundle: Buffer, agentSessionId: string | null = ID): Archive {
  return {
    sessionId: 's1',
    exportedAt: 1,
    meta: { state: 'completed' },
    snapshot: { version: 1, snapshot: { value: 'completed', context: { sessionId: 's1', agentSessionId: ID } } },
    history: [],
    messages: [{ seq: 1, turn: 1, attempt: 1, type: 'session.started', content: { sessionId: ID } }],
    agent: [[`pi:${ID}`, JSON.stringify({ fileName: `t_${ID}.jsonl`, content: '{"type":"session"}\n' })]],
    inbox: [],
    workspace: {
      pointer: {
        version: 1,
        snapshot: SNAPSHOT,
        label: 'turn 1 attempt 1 end',
        at: 5,
        turn: 1,
        attempt: 1,
        agentSessionId,
        promptRecorded: true,
      },
      bundle,
    },
  };
}

/** The archive's lines, parsed, and the text of lines changed by `edit` (1-based line numbers). */
function lines(text: string): Array<Record<string, unknown>> {
  return text
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}
const text = (ls: unknown[]): string =>
  ls.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n';

describe('the workspace lines of an archive', () => {
  // Two and a bit data lines.
  const bundle = randomBytes(2 * WORKSPACE_CHUNK_BYTES + 1000);
  const written = writeArchive(archive(bundle));
  const ls = lines(written);
  const at = ls.findIndex((l) => l.kind === 'workspace');

  it('the pointer, size and sha256 on one line, then the bundle in base64 lines of at most 1 MiB; read back byte for byte', () => {
    expect(at).toBe(5);
    expect(ls[at]).toEqual({
      kind: 'workspace',
      pointer: archive(bundle).workspace?.pointer,
      bytes: bundle.length,
      sha256: createHash('sha256').update(bundle).digest('hex'),
      parts: 3,
    });
    const data = ls.filter((l) => l.kind === 'workspace.data');
    expect(data.map((l) => l.part)).toEqual([1, 2, 3]);
    for (const l of data) expect(String(l.data).length).toBeLessThanOrEqual(1024 * 1024);
    // The pointer is not an agent line.
    expect(ls.filter((l) => l.kind === 'agent').map((l) => l.field)).toEqual([`pi:${ID}`]);
    const read = readArchive(written);
    expect(read.workspace?.bundle.equals(bundle)).toBe(true);
    expect(read.workspace?.pointer).toEqual(archive(bundle).workspace?.pointer);
    expect(read.workspace?.line).toBe(at + 1);
    // Without a workspace, no workspace line.
    const { workspace: _w, ...plain } = archive(bundle);
    expect(readArchive(writeArchive(plain)).workspace).toBeUndefined();
  });

  it('a sha256 that does not match the data is refused, naming the workspace line', () => {
    const bad = ls.map((l, i) => (i === at ? { ...l, sha256: 'b'.repeat(64) } : l));
    expect(() => readArchive(text(bad))).toThrow(
      new RegExp(
        `archive line ${at + 1}: workspace: the data lines' sha256 is [0-9a-f]{64}, the workspace line says b{64}`,
      ),
    );
    // One byte changed in the data: the same.
    const data = String(ls[at + 2]?.data);
    const flipped = ls.map((l, i) =>
      i === at + 2 ? { ...l, data: `${data.slice(0, 100)}${data[100] === 'A' ? 'B' : 'A'}${data.slice(101)}` } : l,
    );
    expect(() => readArchive(text(flipped))).toThrow(`archive line ${at + 1}: workspace: the data lines' sha256`);
  });

  it('a truncated data line, bad base64, a missing or extra part, a size that does not add up: refused, naming the line', () => {
    const raw = written.trimEnd().split('\n');
    const cut = raw.map((l, i) => (i === at + 2 ? l.slice(0, 5000) : l));
    expect(() => readArchive(text(cut))).toThrow(`archive line ${at + 3}: not JSON`);
    const bad = ls.map((l, i) => (i === at + 1 ? { ...l, data: `${String(l.data).slice(0, 400)}*==` } : l));
    expect(() => readArchive(text(bad))).toThrow(`archive line ${at + 2}: workspace.data: data: must be base64`);
    const missing = ls.filter((_, i) => i !== at + 2);
    expect(() => readArchive(text(missing))).toThrow(
      `archive line ${at + 3}: workspace.data: part 3 where 2 was expected`,
    );
    const short = ls.filter((_, i) => i !== at + 3);
    expect(() => readArchive(text(short))).toThrow(
      `archive line ${at + 4}: workspace.data: 2 of the 3 data lines the workspace line (line ${at + 1}) says (truncated?)`,
    );
    const extra = [...ls.slice(0, at + 4), { kind: 'workspace.data', part: 4, data: 'AAAA' }, ...ls.slice(at + 4)];
    expect(() => readArchive(text(extra))).toThrow(
      `archive line ${at + 5}: workspace.data: part 4, the workspace line`,
    );
    const smaller = ls.map((l, i) => (i === at ? { ...l, bytes: bundle.length - 1 } : l));
    expect(() => readArchive(text(smaller))).toThrow(
      `archive line ${at + 4}: workspace.data: the data lines hold more than the ${bundle.length - 1} bytes`,
    );
    const larger = ls.map((l, i) => (i === at ? { ...l, bytes: bundle.length + 1 } : l));
    expect(() => readArchive(text(larger))).toThrow(
      `archive line ${at + 1}: workspace: the data lines hold ${bundle.length} bytes, the workspace line says ${bundle.length + 1}`,
    );
    // A whole archive cut just after its workspace line: no data, no end.
    expect(() => readArchive(text(ls.slice(0, at + 1)))).toThrow('no end line: the archive is truncated');
  });

  it('a data line without a workspace line, a second workspace line, a bundle above the size limit: refused', () => {
    const orphan = ls.filter((_, i) => i !== at);
    expect(() => readArchive(text(orphan))).toThrow(
      `archive line ${at + 1}: workspace.data: a data line without a workspace line before it`,
    );
    const twice = [...ls.slice(0, at + 1), ls[at], ...ls.slice(at + 1)];
    expect(() => readArchive(text(twice))).toThrow(`archive line ${at + 2}: a second workspace line`);
    expect(() =>
      readArchive(written, { maxArchiveBytes: written.length + 10, maxArchiveLineBytes: 2 * 1024 * 1024 }),
    ).not.toThrow();
    const huge = ls.map((l, i) => (i === at ? { ...l, bytes: 10 * written.length } : l));
    expect(() =>
      readArchive(text(huge), { maxArchiveBytes: written.length + 10, maxArchiveLineBytes: 2 * 1024 * 1024 }),
    ).toThrow(`archive line ${at + 1}: workspace: bytes: ${10 * written.length} is above this deployment's limit`);
  });

  it('the pointer: its fields by their shape, its agent session one of this session’s', () => {
    const small = lines(writeArchive(archive(Buffer.from('bundle'))));
    const w = small.findIndex((l) => l.kind === 'workspace');
    const withPointer = (patch: Record<string, unknown>) =>
      text(small.map((l, i) => (i === w ? { ...l, pointer: { ...(l.pointer as object), ...patch } } : l)));
    expect(() => readArchive(withPointer({ snapshot: '../refs/heads/x' }))).toThrow(
      `archive line ${w + 1}: workspace: pointer.snapshot: must be a snapshot id`,
    );
    expect(() => readArchive(withPointer({ agentSessionId: '--resume' }))).toThrow(
      `archive line ${w + 1}: workspace: pointer.agentSessionId: must be an agent session id`,
    );
    expect(() => readArchive(withPointer({ agentSessionId: OTHER }))).toThrow(
      `archive line ${w + 1}: workspace: pointer.agentSessionId: agent session "${OTHER}" does not match the snapshot`,
    );
    expect(() => readArchive(withPointer({ extra: 1 }))).toThrow(`archive line ${w + 1}: workspace: pointer:`);
    expect(readArchive(withPointer({ agentSessionId: null })).workspace?.pointer.agentSessionId).toBeNull();
    // The pointer as a raw agent line (what an archive of an older build would hold) is refused as one.
    const asAgent = [...small.slice(0, w), { kind: 'agent', field: 'workspace', value: '{}' }, ...small.slice(w)];
    expect(() => readArchive(text(asAgent))).toThrow(
      `archive line ${w + 1}: agent: field: must be <agent>:<agent session id>`,
    );
  });
});
