import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { internals } from '../../../src/runtime/internals.ts';
import { ArchiveError, readArchive, writeArchive } from '../../../src/runtime/lifecycle/archive.ts';
import { ConflictError } from '../../../src/runtime/lifecycle/errors.ts';
import { lifecycleKeys } from '../../../src/runtime/lifecycle/keys.ts';
import { sweepWorkspaces } from '../../../src/runtime/lifecycle/workspace-sweep.ts';
import { createWorkspaces } from '../../../src/workspace/index.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import { POINTER_FIELD, parsePointer } from '../../../src/runtime/session-loop/workspace-attempt.ts';
import { sessionPaths } from '../../../src/workspace/layout.ts';
import type { WorkspaceConfig } from '../../../src/workspace/index.ts';
import { runCli } from '../../support/cli.ts';
import { scanSessionKeys } from '../../support/lifecycle.ts';
import type { FakeModelServer } from '../../support/fake-model-server.ts';
import type { PiEnv } from '../../support/pi-env.ts';
import type { RedisServer } from '../../support/redis.ts';
import {
  harness,
  piHostOptions,
  TEST_POLICY,
  turnEnded,
  useRuntimeSuite,
  type Harness,
  type RuntimeSuite,
} from '../../support/runtime.ts';
import { runModel } from '../../support/workspace-model.ts';
import { workspacesIn } from '../../workspace/support.ts';

/**
 * Export and import carry the session's workspace (docs/workspaces.md): with real pi, real git and
 * real Redis, a session's files after a turn on deployment A (its prefix, store, workspace root and
 * sessiond git data) are exported and imported into deployment B, which shares nothing with A but
 * the redis-server (another prefix): B's worker runs the next turn on those files and extends them.
 * Damaged archives and an import with workspaces off are refused with nothing created; an excluded
 * file's content never reaches the archive.
 */

const MODEL = 'ws-transfer';
/** The .env file's content: written by a command that does not hold it, so no message of the conversation does either. */
const SECRET = 'secret-value-9f3e';
const WRITE_SECRET = `printf 'TOKEN=%s\\n' "$(echo ${Buffer.from(SECRET).toString('base64')} | base64 -d)" > .env`;

let redis: RedisServer;
let env: PiEnv;
let server: FakeModelServer;
let h: Harness;
let b: Harness;
let tempDir: RuntimeSuite['tempDir'];
let cliEnv: RuntimeSuite['cliEnv'];
let configA: WorkspaceConfig;
let configB: WorkspaceConfig;
/** Callers with the workspaces of A and of B (the client side of export and import). */
let clientA: Runtime;
let clientB: Runtime;

function workspaceConfig(dir: string, stateDir: string): WorkspaceConfig {
  return workspacesIn(dir, { gitDir: join(stateDir, 'workspace-git'), exclude: ['.env*', '*.pem', 'id_*'] });
}

useRuntimeSuite(
  'ws-transfer',
  {
    scripts: { [MODEL]: runModel() },
    cleanup: async () => {
      await clientA?.close();
      await clientB?.close();
      await b?.close();
    },
  },
  async (s) => {
    ({ redis, env, server, h, tempDir, cliEnv } = s);
    configA = workspaceConfig(tempDir('ws-a'), h.stateDir);
    await h.startWorker({ workspaces: configA, agentOptions: { pi: piHostOptions(env, h.stateDir) } });
    b = harness(redis.url, env, 'ws-transfer-b');
    configB = workspaceConfig(tempDir('ws-b'), b.stateDir);
    await b.startWorker({ workspaces: configB, agentOptions: { pi: piHostOptions(env, b.stateDir) } });
    clientA = new Runtime({ connect: h.connect, prefix: h.prefix, policy: TEST_POLICY, workspaces: configA });
    clientB = new Runtime({ connect: b.connect, prefix: b.prefix, policy: TEST_POLICY, workspaces: configB });
  },
);

async function pointerOf(hh: Harness, sessionId: string) {
  const r = internals(hh.runtime);
  return parsePointer(await r.redis.hget(r.keys.session(sessionId, 'agent'), POINTER_FIELD));
}

/** The store's refs (a session's index is a ref named by its hex-encoded id). */
function storeHas(config: WorkspaceConfig, sessionId: string): boolean {
  // A store no snapshot was written to yet.
  if (!existsSync(config.store)) return false;
  const refs = execFileSync('git', ['--git-dir', config.store, 'for-each-ref'], { encoding: 'utf8' });
  return refs.includes(Buffer.from(sessionId).toString('hex'));
}

/** Nothing of `sessionId` in deployment B: no key, no snapshot in its store, no sessiond git data on its host. */
async function nothingInB(sessionId: string): Promise<void> {
  const r = internals(b.runtime);
  expect(await scanSessionKeys(r.redis, r.keys, sessionId)).toEqual([]);
  expect(storeHas(configB, sessionId)).toBe(false);
  expect(existsSync(sessionPaths(configB, sessionId).dir)).toBe(false);
  expect(existsSync(sessionPaths(callers(configB), sessionId).dir)).toBe(false);
}

/** The git data of a host's callers (src/runtime/caller/parts.ts). */
const callers = (config: WorkspaceConfig): WorkspaceConfig => ({ ...config, gitDir: join(config.gitDir, 'callers') });

/** A session of A with files after one turn (and a .env that no snapshot takes), and its archive. */
async function sessionWithFiles(): Promise<{ sessionId: string; archive: string }> {
  const { sessionId } = await h.runtime.enqueue({
    prompt: `RUN: echo one > a.txt; mkdir -p src; echo 'x = 1' > src/x.py; ${WRITE_SECRET}`,
    options: { provider: 'fake', model: MODEL },
  });
  expect((await turnEnded(h.runtime, sessionId, 1)).state).toBe('completed');
  expect(readFileSync(join(configA.root, sessionId, '.env'), 'utf8')).toBe(`TOKEN=${SECRET}\n`);
  return { sessionId, archive: await clientA.exportSession(sessionId) };
}

describe('export and import carry the workspace', () => {
  it('files after a turn → export → import on another deployment (fresh store and root): the next turn there extends them', async () => {
    const { sessionId, archive } = await sessionWithFiles();
    const pointer = await pointerOf(h, sessionId);
    const read = readArchive(archive);
    expect(read.workspace?.pointer).toEqual(pointer);
    // The pointer travels in the workspace line only.
    expect(read.agent.map(([field]) => field)).not.toContain(POINTER_FIELD);

    // No object of the bundle holds the .env's content (nor does the archive's text).
    expect(archive).not.toContain(SECRET);
    const dir = mkdtempSync(join(tmpdir(), 'sessiond-bundle-'));
    writeFileSync(join(dir, 'b.bundle'), read.workspace?.bundle ?? Buffer.alloc(0));
    execFileSync('git', ['init', '--quiet', '--bare', join(dir, 'r.git')]);
    const git = (...args: string[]) => execFileSync('git', ['--git-dir', join(dir, 'r.git'), ...args]);
    git('fetch', '--quiet', join(dir, 'b.bundle'), 'refs/sessiond/snapshot:refs/x');
    expect(git('cat-file', '--batch-all-objects', '--batch').toString('latin1')).not.toContain(SECRET);
    expect(
      git('ls-tree', '-r', '--name-only', 'refs/x', '--', 'files/').toString('utf8').trim().split('\n').sort(),
    ).toEqual(['files/a.txt', 'files/src/x.py']);

    const imported = await clientB.importSession(archive);
    expect(imported).toMatchObject({ sessionId, conversation: 'kept' });
    const stored = await pointerOf(b, sessionId);
    expect(stored).toEqual(pointer);
    expect(storeHas(configB, sessionId)).toBe(true);
    // The import used git data of its own on this host: the worker's are untouched.
    expect(existsSync(sessionPaths(callers(configB), sessionId).dir)).toBe(true);
    expect(existsSync(sessionPaths(configB, sessionId).dir)).toBe(false);

    await b.runtime.enqueue({ sessionId, prompt: 'RUN: cat a.txt src/x.py > b.txt; ls -a > list.txt # on-b' });
    expect((await turnEnded(b.runtime, sessionId, 2)).state).toBe('completed');
    const path = join(configB.root, sessionId);
    expect(readFileSync(join(path, 'b.txt'), 'utf8')).toBe('one\nx = 1\n');
    expect(readFileSync(join(path, 'list.txt'), 'utf8').split('\n')).not.toContain('.env');
    expect((await pointerOf(b, sessionId))?.turn).toBe(2);
    // The agent went on with the conversation recorded with those files (turn 1's tool call in it).
    const onB = server.requestsFor(MODEL).filter((r) => JSON.stringify(r.body.messages ?? []).includes('# on-b'));
    expect(onB.length).toBeGreaterThan(0);
    expect(JSON.stringify(onB[0]?.body.messages)).toContain('echo one > a.txt');

    // A caller started after the worker, with an exclude list of its own, leaves the worker's as it is.
    const exclude = readFileSync(join(configB.gitDir, 'exclude'), 'utf8');
    expect(exclude).toBe('.env*\n*.pem\nid_*\n');
    const late = new Runtime({
      connect: b.connect,
      prefix: b.prefix,
      policy: TEST_POLICY,
      workspaces: { ...configB, exclude: ['only-the-callers.txt'] },
    });
    try {
      expect(readArchive(await late.exportSession(sessionId)).workspace?.pointer.turn).toBe(2);
    } finally {
      await late.close();
    }
    expect(readFileSync(join(configB.gitDir, 'exclude'), 'utf8')).toBe(exclude);
  }, 120_000);

  it('import under a new id: the copy’s pointer names its own forked conversation, and its next turn extends the files', async () => {
    const { sessionId, archive } = await sessionWithFiles();
    const copy = `${sessionId}-copy`;
    expect((await clientB.importSession(archive, { as: copy })).conversation).toBe('forked');
    const view = await b.runtime.getSession(copy);
    const forked = view?.context?.agentSessionId;
    expect(typeof forked).toBe('string');
    expect(forked).not.toBe((await pointerOf(h, sessionId))?.agentSessionId);
    expect((await pointerOf(b, copy))?.agentSessionId).toBe(forked);
    await b.runtime.enqueue({ sessionId: copy, prompt: 'RUN: cat a.txt > c.txt' });
    expect((await turnEnded(b.runtime, copy, 2)).state).toBe('completed');
    expect(readFileSync(join(configB.root, copy, 'c.txt'), 'utf8')).toBe('one\n');
  }, 120_000);

  it('an import under the id of a deleted session whose workspace removal is still queued: the removal is done first, the sweep leaves the import alone', async () => {
    const { sessionId, archive } = await sessionWithFiles();
    const again = `${sessionId}-again`;
    await clientB.importSession(archive, { as: again });
    expect((await b.runtime.deleteSession(again)).deleted).toBe(true);
    const r = internals(b.runtime);
    const gone = lifecycleKeys(r.keys).workspacesGone;
    expect(await r.redis.zscore(gone, again)).not.toBeNull();
    await clientB.importSession(archive, { as: again });
    expect(await r.redis.zscore(gone, again)).toBeNull();
    const swept = await sweepWorkspaces(r.redis, r.keys, createWorkspaces(configB), configB, () => undefined);
    expect(swept.removed).toBe(0);
    expect(storeHas(configB, again)).toBe(true);
    await b.runtime.enqueue({ sessionId: again, prompt: 'RUN: cat a.txt > d.txt' });
    expect((await turnEnded(b.runtime, again, 2)).state).toBe('completed');
    expect(readFileSync(join(configB.root, again, 'd.txt'), 'utf8')).toBe('one\n');
  }, 120_000);

  it('a damaged archive (sha256, a truncated data line, bad base64, not a bundle) is refused naming the line; nothing is created', async () => {
    const { sessionId, archive } = await sessionWithFiles();
    const lines = archive.trimEnd().split('\n');
    const at = lines.findIndex((l) => l.startsWith('{"kind":"workspace"')) + 1;
    const edit = (line: number, change: (l: Record<string, unknown>) => unknown) =>
      lines
        .map((l, i) => (i === line - 1 ? JSON.stringify(change(JSON.parse(l) as Record<string, unknown>)) : l))
        .join('\n') + '\n';
    const cases: Array<[string, string, RegExp]> = [
      [
        'sha256',
        edit(at, (l) => ({ ...l, sha256: '0'.repeat(64) })),
        new RegExp(`^archive line ${at}: workspace: the data lines' sha256`),
      ],
      [
        'truncated',
        lines.map((l, i) => (i === at ? l.slice(0, Math.floor(l.length / 2)) : l)).join('\n') + '\n',
        new RegExp(`^archive line ${at + 1}: not JSON`),
      ],
      [
        'base64',
        edit(at + 1, (l) => ({ ...l, data: `!${String(l.data).slice(1)}` })),
        new RegExp(`^archive line ${at + 1}: workspace.data: data: must be base64`),
      ],
    ];
    for (const [name, text, error] of cases) {
      const refused = await clientB.importSession(text, { as: `${sessionId}-${name}` }).catch((e: unknown) => e);
      expect(refused, name).toBeInstanceOf(ArchiveError);
      expect((refused as Error).message, name).toMatch(error);
      await nothingInB(`${sessionId}-${name}`);
    }
    // Whole and of the right sha256, but not a bundle: refused by the store after it was written, and taken back.
    const read = readArchive(archive);
    const junk = writeArchive({
      ...read,
      workspace: { pointer: read.workspace!.pointer, bundle: Buffer.from('# v2 git bundle\nnope\n\n') },
    });
    const refused = await clientB.importSession(junk, { as: `${sessionId}-junk` }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ArchiveError);
    expect((refused as Error).message).toMatch(new RegExp(`^archive line ${at}: workspace: bundle: not a git bundle`));
    await nothingInB(`${sessionId}-junk`);
    // An id that exists: refused before anything is stored.
    await clientB.importSession(archive, { as: `${sessionId}-taken` });
    const before = execFileSync('git', ['--git-dir', configB.store, 'for-each-ref'], { encoding: 'utf8' });
    await expect(clientB.importSession(archive, { as: `${sessionId}-taken` })).rejects.toBeInstanceOf(ConflictError);
    expect(execFileSync('git', ['--git-dir', configB.store, 'for-each-ref'], { encoding: 'utf8' })).toBe(before);
  }, 120_000);

  it('workspaces off: the import is refused naming the workspace line, the export too (it would lose the files), and an export from another store', async () => {
    const { sessionId, archive } = await sessionWithFiles();
    const plain = new Runtime({ connect: b.connect, prefix: b.prefix, policy: TEST_POLICY });
    try {
      const refused = await plain.importSession(archive, { as: `${sessionId}-off` }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(ArchiveError);
      expect((refused as Error).message).toMatch(
        /^archive line \d+: workspace: the archive carries a workspace, and workspaces are off/,
      );
      await nothingInB(`${sessionId}-off`);
    } finally {
      await plain.close();
    }
    const reader = new Runtime({ connect: h.connect, prefix: h.prefix, policy: TEST_POLICY });
    // A client whose store is not the workers' (B's store, for A's session): refused too, naming the snapshot.
    const elsewhere = new Runtime({ connect: h.connect, prefix: h.prefix, policy: TEST_POLICY, workspaces: configB });
    try {
      await expect(reader.exportSession(sessionId)).rejects.toThrow(
        /has a workspace, and this client has none configured/,
      );
      const snapshot = (await pointerOf(h, sessionId))?.snapshot ?? '';
      await expect(elsewhere.exportSession(sessionId)).rejects.toThrow(
        new RegExp(`its workspace's snapshot ${snapshot} is not in the store this client reaches .*: not exported`),
      );
    } finally {
      await reader.close();
      await elsewhere.close();
    }
  }, 120_000);

  it('the CLI: export and import with the configuration’s workspaces; import refused when they are off', async () => {
    const { sessionId } = await sessionWithFiles();
    const file = join(tempDir('ws-cli'), 'archive.jsonl');
    const withWorkspaces = (prefix: string, config: WorkspaceConfig, stateDir: string) => ({
      ...cliEnv(prefix),
      SESSIOND_STATE_DIR: stateDir,
      SESSIOND_WORKSPACES_ENABLED: 'true',
      SESSIOND_WORKSPACES: config.root,
      SESSIOND_WORKSPACE_STORE: config.store,
    });
    const exported = await runCli(['export', sessionId, '--out', file], {
      env: withWorkspaces(h.prefix, configA, h.stateDir),
    });
    expect(exported.stderr).toBe('');
    expect(exported.exitCode).toBe(0);
    const off = await runCli(['import', file, '--as', `${sessionId}-cli-off`], {
      env: { ...cliEnv(b.prefix), SESSIOND_WORKSPACES_ENABLED: 'false' },
    });
    expect(off.exitCode).toBe(2);
    expect(off.stderr).toMatch(/workspaces are off in this deployment .*; nothing was written/);
    await nothingInB(`${sessionId}-cli-off`);
    const imported = await runCli(['import', file, '--as', `${sessionId}-cli`], {
      env: withWorkspaces(b.prefix, configB, b.stateDir),
    });
    expect(imported.stderr).toBe('');
    expect(imported.exitCode).toBe(0);
    expect((await pointerOf(b, `${sessionId}-cli`))?.snapshot).toBe(
      readArchive(readFileSync(file, 'utf8')).workspace?.pointer.snapshot,
    );
    expect(storeHas(configB, `${sessionId}-cli`)).toBe(true);
  }, 120_000);
});
