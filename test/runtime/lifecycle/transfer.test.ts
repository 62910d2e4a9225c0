import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ArchiveError, readArchive } from '../../../src/runtime/lifecycle/archive.ts';
import { ConflictError } from '../../../src/runtime/lifecycle/errors.ts';
import { runCli } from '../../support/cli.ts';
import { fleetMentions, scanSessionKeys } from '../../support/lifecycle.ts';
import type { FakeModelServer } from '../../support/fake-model-server.ts';
import type { PiEnv } from '../../support/pi-env.ts';
import type { RedisServer } from '../../support/redis.ts';
import {
  harness,
  piHostOptions,
  turnEnded,
  useRuntimeSuite,
  type Harness,
  type RuntimeSuite,
} from '../../support/runtime.ts';
import { internals } from '../../../src/runtime/internals.ts';

/**
 * Export and import: a versioned JSON-lines archive; a round trip gives back the same session, and a
 * worker on a host that never saw it continues the agent's conversation; bad archives (truncated,
 * future versions, hostile ids, fuzzed) are refused with a clear error and nothing written.
 */

const TURN_1 = 'Remember the word HERON-7 for me.';
const TURN_2 = 'Which word did I ask you to remember?';

let redis: RedisServer;
let server: FakeModelServer;
let env: PiEnv;
let h: Harness;
let cliEnv: RuntimeSuite['cliEnv'];
/** Another deployment (another prefix) on the same Redis. */
let other: Harness;
let tempDir: RuntimeSuite['tempDir'];

useRuntimeSuite(
  'transfer',
  {
    cleanup: async () => {
      await other?.close();
    },
  },
  (s) => {
    ({ redis, server, env, h, tempDir, cliEnv } = s);
    other = harness(redis.url, env, 'transfer-other');
  },
);

function cli(args: string[], prefix = h.prefix) {
  return runCli(args, { env: cliEnv(prefix) });
}

/** A session as an operator sees it, without what names its deployment or its id. */
async function comparable(hh: Harness, sessionId: string) {
  const view = await hh.runtime.getSession(sessionId);
  if (view === null) throw new Error(`no session ${sessionId}`);
  const { sessionId: _id, updatedAt: _u, heldBy: _h, context, ...rest } = view;
  return {
    ...rest,
    context: context === null ? null : { ...context, sessionId: '*' },
    messages: await hh.runtime.readMessages(sessionId),
    agent: await internals(hh.runtime).redis.hgetall(internals(hh.runtime).keys.session(sessionId, 'agent')),
  };
}

/** An agent session id of no session of this archive. */
const OTHER_AGENT_SESSION = '7f7f7f7f-2222-4b4b-8c8c-000000000002';
const piState = (line: Record<string, unknown>) =>
  JSON.parse(String(line.value)) as { fileName: string; content: string };
const agentIdOf = (line: Record<string, unknown>) => String(line.field).slice('pi:'.length);
function withContext(line: Record<string, unknown>, patch: Record<string, unknown>): Record<string, unknown> {
  const value = line.value as { snapshot: { context: Record<string, unknown> } };
  return {
    ...line,
    value: { ...value, snapshot: { ...value.snapshot, context: { ...value.snapshot.context, ...patch } } },
  };
}

let archivePath = '';
let archiveText = '';

describe('export and import', { timeout: 120_000 }, () => {
  it(
    'export → import elsewhere gives the same session; export → delete → import → a worker on a new host continues the conversation',
    { timeout: 180_000 },
    async () => {
      const hostA = await h.startWorker({
        agentOptions: { pi: piHostOptions(env, tempDir('a-state'), tempDir('a-sessions')) },
      });
      const { sessionId } = await h.runtime.enqueue({
        prompt: TURN_1,
        options: { provider: 'fake', model: 'text', cwd: env.cwd },
      });
      expect((await turnEnded(h.runtime, sessionId)).state).toBe('completed');
      await hostA.close(2000);
      const original = await comparable(h, sessionId);
      // Its token sums travel with it (compared with the rest below).
      expect(original.usage?.total).toMatchObject({ input: 42, output: 7 });

      archivePath = join(tempDir('archive'), 'session.jsonl');
      const exported = await cli(['export', sessionId, '--out', archivePath]);
      expect(exported).toMatchObject({ exitCode: 0, stderr: '' });
      archiveText = readFileSync(archivePath, 'utf8');
      const lines = archiveText
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l) as { kind: string });
      expect(lines[0]).toMatchObject({ kind: 'sessiond.archive', version: 1, sessionId });
      expect(lines.map((l) => l.kind)).toEqual(
        expect.arrayContaining(['meta', 'snapshot', 'history', 'message', 'agent', 'end']),
      );
      expect(lines.filter((l) => l.kind === 'message')).toHaveLength(original.messages.length);
      // The HTTP route and stdout give the same archive, but for the time it was made.
      const stdout = await cli(['export', sessionId]);
      expect(stdout.stdout.split('\n').slice(1)).toEqual(archiveText.split('\n').slice(1));

      // Into another deployment, under another id: the same session, with a copy of the agent conversation under an id of its own.
      const copy = await cli(['import', archivePath, '--as', 'copied-session', '--json'], other.prefix);
      expect(copy.stderr).toBe('');
      expect(JSON.parse(copy.stdout)).toEqual({
        sessionId: 'copied-session',
        messages: original.messages.length,
        state: 'completed',
        conversation: 'forked',
      });
      const copied = await comparable(other, 'copied-session');
      const copyAgentId = copied.context?.agentSessionId;
      expect(typeof copyAgentId === 'string' && copyAgentId !== original.context?.agentSessionId).toBe(true);
      expect({ ...copied, context: { ...copied.context, agentSessionId: '*' }, agent: '*' }).toEqual({
        ...original,
        context: { ...original.context, agentSessionId: '*' },
        agent: '*',
      });
      expect(Object.keys(copied.agent)).toEqual([`pi:${String(copyAgentId)}`]);
      expect((await other.runtime.listSessions()).map((s) => s.sessionId)).toContain('copied-session');
      // Importing again over it is refused, and changes nothing.
      const twice = await cli(['import', archivePath, '--as', 'copied-session'], other.prefix);
      expect(twice.exitCode).toBe(1);
      expect(twice.stderr).toContain('already exists');
      expect(await comparable(other, 'copied-session')).toEqual(copied);

      // Delete it here, bring it back from the archive, and go on with the conversation on a host that never saw it.
      expect((await cli(['delete', sessionId])).exitCode).toBe(0);
      expect(await scanSessionKeys(internals(h.runtime).redis, internals(h.runtime).keys, sessionId)).toEqual([
        `${h.prefix}:{s:${sessionId}}:gone`,
      ]);
      expect((await cli(['import', archivePath])).exitCode).toBe(0);
      expect(await comparable(h, sessionId)).toEqual(original);

      await h.startWorker({ agentOptions: { pi: piHostOptions(env, tempDir('b-state'), tempDir('b-sessions')) } });
      server.reset();
      await h.runtime.enqueue({ sessionId, prompt: TURN_2 });
      const session = await turnEnded(h.runtime, sessionId, 2);
      expect(session.state).toBe('completed');
      const turn2 = (await h.runtime.readMessages(sessionId)).filter((m) => m.turn === 2);
      expect(turn2[0]).toMatchObject({
        type: 'session.resumed',
        content: { sessionId: original.context?.agentSessionId },
      });
      expect(server.requests).toHaveLength(1);
      const sent = JSON.stringify(server.requests[0]?.body.messages ?? []);
      expect(sent).toContain(TURN_1);
      expect(sent).toContain(TURN_2);
    },
  );

  it('a copy imported under a new id next to its original continues its own conversation: neither sees the other’s turns, on one host', async () => {
    // One host for both (one pi session folder): a shared agent session id would mean one shared conversation file.
    // The other deployment: no worker of its own has run yet (the one above still runs on this one, with another folder).
    await other.startWorker({
      agentOptions: { pi: piHostOptions(env, tempDir('one-state'), tempDir('one-sessions')) },
    });
    const { sessionId } = await other.runtime.enqueue({
      prompt: TURN_1,
      options: { provider: 'fake', model: 'text', cwd: env.cwd },
    });
    expect((await turnEnded(other.runtime, sessionId)).state).toBe('completed');
    const archive = await other.runtime.exportSession(sessionId);
    expect(await other.runtime.importSession(archive, { as: `${sessionId}-copy` })).toMatchObject({
      conversation: 'forked',
    });

    const ask = async (id: string, prompt: string): Promise<string> => {
      server.reset();
      await other.runtime.enqueue({ sessionId: id, prompt });
      expect((await turnEnded(other.runtime, id, 2)).state).toBe('completed');
      expect(server.requests).toHaveLength(1);
      return JSON.stringify(server.requests[0]?.body.messages ?? []);
    };
    const inCopy = await ask(`${sessionId}-copy`, 'COPY-ONLY question');
    const inOriginal = await ask(sessionId, 'ORIGINAL-ONLY question');
    // Both continue the first turn; each only its own second one.
    expect(inCopy).toContain(TURN_1);
    expect(inOriginal).toContain(TURN_1);
    expect(inCopy).not.toContain('ORIGINAL-ONLY');
    expect(inOriginal).not.toContain('COPY-ONLY');
  });

  it('a future archive version is refused with a clear error, nothing written', async () => {
    const lines = archiveText.split('\n');
    lines[0] = JSON.stringify({ ...(JSON.parse(lines[0] as string) as object), version: 2 });
    const path = join(tempDir('future'), 'future.jsonl');
    writeFileSync(path, lines.join('\n'));
    const result = await cli(['import', path, '--as', 'from-the-future']);
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toContain(
      'archive line 1: version 2 is not supported (this build reads version 1; it was written by a newer sessiond); nothing was written',
    );
    expect(await scanSessionKeys(internals(h.runtime).redis, internals(h.runtime).keys, 'from-the-future')).toEqual([]);
  });

  it('truncated, hostile and malformed archives: refused with the line named, nothing written', async () => {
    const lines = archiveText.trimEnd().split('\n');
    const edit = (i: number, change: (line: Record<string, unknown>) => unknown) =>
      lines.map((l, j) => (j === i ? JSON.stringify(change(JSON.parse(l) as Record<string, unknown>)) : l)).join('\n');
    const messageAt = lines.findIndex((l) => l.includes('"kind":"message"'));
    const agentAt = lines.findIndex((l) => l.includes('"kind":"agent"'));
    const cases: Array<[string, string, RegExp]> = [
      ['empty', '', /empty/],
      ['not an archive', '{"hello":1}\n', /line 1: not a sessiond archive/],
      ['cut after the messages', lines.slice(0, messageAt + 2).join('\n'), /no end line: the archive is truncated/],
      ['cut inside a line', archiveText.slice(0, Math.floor(archiveText.length / 2)), /not JSON|truncated/],
      [
        'a message dropped',
        lines.filter((_, i) => i !== messageAt).join('\n'),
        /message seq 2 where 1 was expected|end line counts/,
      ],
      [
        'hostile session id',
        edit(0, (l) => ({ ...l, sessionId: '../../etc/passwd' })),
        /line 1: sessionId: must be 1-100 letters/,
      ],
      [
        'hostile id in the snapshot',
        edit(2, (l) => ({
          ...l,
          value: {
            ...(l.value as object),
            snapshot: { ...(l.value as { snapshot: object }).snapshot, context: { sessionId: 'x}:{s:y' } },
          },
        })),
        /line 3: snapshot: value.snapshot.context.sessionId/,
      ],
      [
        'hostile agent field',
        edit(agentAt, (l) => ({ ...l, field: 'pi:../../escape' })),
        /agent: field: must be <agent>:<agent session id>/,
      ],
      [
        'unknown meta field',
        edit(1, (l) => ({ ...l, fields: { ...(l.fields as object), lease: 'w#1' } })),
        /line 2: meta: fields/,
      ],
      [
        'an unknown kind',
        [...lines.slice(0, 3), '{"kind":"shell","cmd":"rm -rf /"}', ...lines.slice(3)].join('\n'),
        /line 4: unknown line kind "shell"/,
      ],
      ['a line after the end', [...lines, lines[1]].join('\n'), /a line after the end line/],
      [
        'snapshot version from elsewhere',
        edit(2, (l) => ({ ...l, value: { ...(l.value as object), version: 9 } })),
        /the snapshot must be version 1/,
      ],
      // Issue 25: every field checked as a caller's would be, by the agent's own rules, before anything is written.
      [
        'traversal fileName',
        edit(agentAt, (l) => ({
          ...l,
          value: JSON.stringify({ ...piState(l), fileName: `../../../tmp/x_${agentIdOf(l)}.jsonl` }),
        })),
        /line \d+: agent: value\.fileName: .* is not a file name pi writes/,
      ],
      [
        'an agentSessionId that is an option',
        edit(2, (l) => withContext(l, { agentSessionId: '--extension=/tmp/evil.ts' })),
        /line 3: snapshot: value\.snapshot\.context\.agentSessionId: must be an agent session id/,
      ],
      [
        'a 30 MB message line',
        edit(messageAt, (l) => ({ ...l, content: { text: 'x'.repeat(30 * 1024 * 1024) } })),
        new RegExp(
          `line ${messageAt + 1}: the line is 3145\\d{4} bytes, above this deployment's limit of 16777216 per line \\(lifecycle\\.maxArchiveLineBytes\\)`,
        ),
      ],
      [
        'maxAttempts 1,000,000, no delay, auth and startup retried',
        edit(1, (l) => ({
          ...l,
          fields: {
            ...(l.fields as object),
            policy: JSON.stringify({
              maxAttempts: 1_000_000,
              initialDelayMs: 0,
              retryOn: ['auth', 'startup', 'network'],
            }),
          },
        })),
        /line 2: meta: fields\.policy: maxAttempts: must be an integer from 1 to 100 \(got 1000000\)/,
      ],
      [
        'the snapshot’s own retry policy out of the schema',
        edit(2, (l) =>
          withContext(l, {
            policy: {
              ...(l.value as { snapshot: { context: { policy: object } } }).snapshot.context.policy,
              maxAttempts: 1_000_000,
            },
          }),
        ),
        /line 3: snapshot: value\.snapshot\.context\.policy: maxAttempts: must be an integer from 1 to 100 \(got 1000000\)/,
      ],
      [
        'an agent line mismatching the snapshot',
        edit(agentAt, (l) => ({ ...l, field: `pi:${OTHER_AGENT_SESSION}` })),
        /agent: field: agent session ".*" does not match the snapshot/,
      ],
      [
        'an agent line naming another session’s file',
        edit(agentAt, (l) => ({
          ...l,
          value: JSON.stringify({ ...piState(l), fileName: `2026-12-01T10-00-00-000Z_${OTHER_AGENT_SESSION}.jsonl` }),
        })),
        /agent: value\.fileName: ".*" is the file of pi session/,
      ],
    ];
    for (const [name, text, error] of cases) {
      await expect(h.runtime.importSession(text, { as: 'fuzz-target' }), name).rejects.toThrow(error);
      await expect(h.runtime.importSession(text, { as: 'fuzz-target' }), name).rejects.toBeInstanceOf(ArchiveError);
    }
    await expect(h.runtime.importSession(archiveText, { as: '../escape' })).rejects.toThrow(
      /--as: a session id must be/,
    );
    expect(await scanSessionKeys(internals(h.runtime).redis, internals(h.runtime).keys, 'fuzz-target')).toEqual([]);
    expect(await fleetMentions(internals(h.runtime).redis, internals(h.runtime).keys, 'fuzz-target')).toEqual([]);
  });

  it('fuzzed archives: every import either writes the whole session or refuses with an ArchiveError and writes nothing', async () => {
    const lines = archiveText.trimEnd().split('\n');
    let n = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.nat(lines.length - 1),
        fc.nat(10_000),
        fc.constantFrom('cut', 'drop', 'duplicate', 'flip', 'swap'),
        async (i, at, how) => {
          const target = `fuzz-${(n += 1)}`;
          const line = lines[i] as string;
          const pos = at % Math.max(1, line.length);
          const mutated =
            how === 'cut'
              ? [...lines.slice(0, i), line.slice(0, pos)].join('\n')
              : how === 'drop'
                ? lines.filter((_, j) => j !== i).join('\n')
                : how === 'duplicate'
                  ? [...lines.slice(0, i + 1), line, ...lines.slice(i + 1)].join('\n')
                  : how === 'flip'
                    ? lines
                        .map((l, j) =>
                          j === i
                            ? `${l.slice(0, pos)}${String.fromCharCode((l.charCodeAt(pos) + 1) % 128)}${l.slice(pos + 1)}`
                            : l,
                        )
                        .join('\n')
                    : lines
                        .map((l, j) =>
                          j === i
                            ? (lines[(i + 1) % lines.length] as string)
                            : j === (i + 1) % lines.length
                              ? l.replace(/.*/, line)
                              : l,
                        )
                        .join('\n');
          const valid = (() => {
            try {
              readArchive(mutated);
              return true;
            } catch {
              return false;
            }
          })();
          try {
            await h.runtime.importSession(mutated, { as: target });
            expect(valid).toBe(true);
            expect((await h.runtime.getSession(target))?.sessionId).toBe(target);
            await h.runtime.deleteSession(target, { force: true });
          } catch (error) {
            if (!(error instanceof ArchiveError) && !(error instanceof ConflictError)) throw error;
            expect(valid).toBe(false);
            expect(await scanSessionKeys(internals(h.runtime).redis, internals(h.runtime).keys, target)).toEqual([]);
            expect(await fleetMentions(internals(h.runtime).redis, internals(h.runtime).keys, target)).toEqual([]);
          }
        },
      ),
      { numRuns: 150, seed: 1313 },
    );
  });
});
