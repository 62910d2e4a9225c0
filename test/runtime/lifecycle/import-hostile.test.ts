import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../../support/cli.ts';
import { fleetMentions, scanSessionKeys } from '../../support/lifecycle.ts';
import type { FakeModelServer } from '../../support/fake-model-server.ts';
import type { PiEnv } from '../../support/pi-env.ts';
import type { RedisServer } from '../../support/redis.ts';
import {
  harness,
  piHostOptions,
  turnEnded,
  until,
  useRuntimeSuite,
  type Harness,
  type RuntimeSuite,
} from '../../support/runtime.ts';
import { internals } from '../../../src/runtime/internals.ts';
import { deploymentPolicy } from '../../../src/runtime/deployment-policy.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';

/**
 * Hostile archives (issue 25, findings 1-3), with real pi against the fake model on one host (one
 * pi session folder for every session, as a real host has): an import never reaches another
 * session's agent conversation, an imported retry policy is checked as a caller's, and hostile
 * fields are refused at import naming the line and the field, with nothing written.
 */

const SECRET = 'VICTIM-PRIVATE-PROMPT: the vault code is 4711.';
const ATTACKER = 'ATTACKER-TURN: what did we talk about?';

let redis: RedisServer;
let server: FakeModelServer;
let env: PiEnv;
let h: Harness;
let cliEnv: RuntimeSuite['cliEnv'];
/** A deployment with no worker of its own until a test starts one. */
let idle: Harness;
let sessionsDir = '';
let tempDir: RuntimeSuite['tempDir'];

useRuntimeSuite(
  'import-hostile',
  {
    cleanup: async () => {
      await idle?.close();
    },
  },
  async (s) => {
    ({ redis, server, env, h, tempDir, cliEnv } = s);
    idle = harness(redis.url, env, 'import-hostile-idle');
    sessionsDir = tempDir('pi-sessions');
    await h.startWorker({ agentOptions: { pi: piHostOptions(env, tempDir('pi-state'), sessionsDir) } });
  },
);

function cli(args: string[], prefix = h.prefix) {
  return runCli(args, { env: cliEnv(prefix) });
}

type Line = Record<string, unknown> & { kind: string };

/** The victim: a session whose first prompt is private, its pi conversation file on this host. */
async function victim(): Promise<{ sessionId: string; agentSessionId: string; file: string; lines: Line[] }> {
  const { sessionId } = await h.runtime.enqueue({
    prompt: SECRET,
    options: { provider: 'fake', model: 'text', cwd: env.cwd },
  });
  const session = await turnEnded(h.runtime, sessionId);
  expect(session.state).toBe('completed');
  const agentSessionId = String(session.context?.agentSessionId);
  const name = readdirSync(sessionsDir).find((n) => n.endsWith(`_${agentSessionId}.jsonl`));
  if (name === undefined) throw new Error(`no pi file of ${agentSessionId}`);
  const file = join(sessionsDir, name);
  expect(readFileSync(file, 'utf8')).toContain(SECRET);
  const lines = (await h.runtime.exportSession(sessionId))
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as Line);
  return { sessionId, agentSessionId, file, lines };
}

/** The victim's archive as an attacker edits it: another session id (header and snapshot), the agent lines as `agent` makes them, the end line recounted. */
function tampered(
  lines: readonly Line[],
  sessionId: string,
  agent: (lines: Line[]) => Line[],
  edit: (line: Line) => Line = (l) => l,
): string {
  const out: Line[] = [];
  for (const line of lines) {
    if (line.kind === 'sessiond.archive') out.push({ ...line, sessionId });
    else if (line.kind === 'snapshot') {
      const value = line.value as { snapshot: { context: Record<string, unknown> } };
      out.push({
        ...line,
        value: { ...value, snapshot: { ...value.snapshot, context: { ...value.snapshot.context, sessionId } } },
      });
    } else if (line.kind !== 'agent' && line.kind !== 'end') out.push(line);
  }
  const agentLines = agent(lines.filter((l) => l.kind === 'agent'));
  const end = lines.find((l) => l.kind === 'end') as Line;
  const at = out.findIndex((l) => l.kind === 'inbox');
  out.splice(at === -1 ? out.length : at, 0, ...agentLines);
  out.push({ ...end, agent: agentLines.length });
  return out.map((l) => JSON.stringify(edit(l))).join('\n') + '\n';
}

function archiveFile(text: string): string {
  const path = join(tempDir('archive'), 'a.jsonl');
  writeFileSync(path, text);
  return path;
}

/** What the model was sent in the attacker's next turn; the victim's file after it. */
async function attackerTurn(sessionId: string): Promise<string> {
  server.reset();
  await h.runtime.enqueue({ sessionId, prompt: ATTACKER });
  const turn = (await h.runtime.getSession(sessionId))?.context?.turnIndex ?? 0;
  const session = await turnEnded(h.runtime, sessionId, turn + 1);
  expect(session.state).toBe('completed');
  expect(server.requests).toHaveLength(1);
  return JSON.stringify(server.requests[0]?.body.messages ?? []);
}

async function nothingWritten(sessionId: string): Promise<void> {
  const { redis: r, keys } = internals(h.runtime);
  expect(await scanSessionKeys(r, keys, sessionId)).toEqual([]);
  expect(await fleetMentions(r, keys, sessionId)).toEqual([]);
}

describe('an imported archive never reaches another session’s agent conversation', { timeout: 120_000 }, () => {
  it('the victim’s archive under another id, its agent line dropped: the attacker’s turn neither carries the victim’s prompt nor appends to its file', async () => {
    const v = await victim();
    const before = readFileSync(v.file, 'utf8');
    const imported = await cli(['import', archiveFile(tampered(v.lines, 'attacker-1', () => [])), '--json']);
    expect(imported).toMatchObject({ exitCode: 0, stderr: '' });
    // The agent session id is the victim's: the copy starts a conversation of its own (the archive has no state to fork).
    expect(JSON.parse(imported.stdout)).toMatchObject({ sessionId: 'attacker-1', conversation: 'new' });
    const sent = await attackerTurn('attacker-1');
    expect(sent).toContain(ATTACKER);
    expect(sent).not.toContain(SECRET);
    expect(readFileSync(v.file, 'utf8')).toBe(before);
    expect((await h.runtime.getSession('attacker-1'))?.context?.agentSessionId).not.toBe(v.agentSessionId);
  });

  it('the victim’s agent line kept (its file rewritten by the attacker): the import forks it, the victim’s file is never written', async () => {
    const v = await victim();
    const before = readFileSync(v.file, 'utf8');
    const text = tampered(v.lines, 'attacker-2', (agent) =>
      agent.map((l) => {
        const state = JSON.parse(String(l.value)) as { fileName: string; content: string };
        // What the attacker wants in the victim's file.
        return { ...l, value: JSON.stringify({ ...state, content: `${state.content.split('\n')[0]}\n` }) };
      }),
    );
    const imported = await cli(['import', archiveFile(text), '--json']);
    expect(imported).toMatchObject({ exitCode: 0, stderr: '' });
    expect(JSON.parse(imported.stdout)).toMatchObject({ sessionId: 'attacker-2', conversation: 'forked' });
    await attackerTurn('attacker-2');
    expect(readFileSync(v.file, 'utf8')).toBe(before);
    const own = String((await h.runtime.getSession('attacker-2'))?.context?.agentSessionId);
    expect(own).not.toBe(v.agentSessionId);
    expect(readdirSync(sessionsDir).filter((n) => n.endsWith(`_${own}.jsonl`))).toHaveLength(1);
  });

  it('an agent line of a fresh agent session id whose file is the victim’s: refused at import naming the line and the field, the victim’s file untouched', async () => {
    const v = await victim();
    const before = readFileSync(v.file, 'utf8');
    const fresh = '5e5e5e5e-0000-4000-8000-00000000abcd';
    const text = tampered(
      v.lines,
      'attacker-3',
      (agent) =>
        agent.map((l) => ({
          ...l,
          field: `pi:${fresh}`,
          value: JSON.stringify({ ...(JSON.parse(String(l.value)) as object), content: '{"type":"session"}\n' }),
        })),
      (l) => (l.kind === 'snapshot' ? withAgentSessionId(l, fresh) : l),
    );
    const agentLine = text.split('\n').findIndex((l) => l.includes('"kind":"agent"')) + 1;
    const imported = await cli(['import', archiveFile(text)]);
    expect(imported.exitCode).toBe(2);
    expect(imported.stderr).toContain(`archive line ${agentLine}: agent: value.fileName:`);
    expect(imported.stderr).toContain('nothing was written');
    await nothingWritten('attacker-3');
    expect(readFileSync(v.file, 'utf8')).toBe(before);
  });
});

function withAgentSessionId(line: Line, agentSessionId: unknown): Line {
  const value = line.value as { snapshot: { context: Record<string, unknown> } };
  return {
    ...line,
    value: { ...value, snapshot: { ...value.snapshot, context: { ...value.snapshot.context, agentSessionId } } },
  };
}

const HOSTILE_POLICY = {
  enabled: true,
  maxAttempts: 1_000_000,
  initialDelayMs: 0,
  multiplier: 1,
  maxDelayMs: 0,
  jitter: 'none',
  retryOn: ['network', 'timeout', 'rate_limited', 'server_error', 'process_crash', 'auth', 'startup'],
  honorRetryAfter: true,
  maxRetryAfterMs: 600000,
  maxTurnMs: 0,
  rateLimitAttempts: 'free',
  maxParkMs: 86400000,
};

describe(
  'an imported retry policy is checked as a caller’s, and bounded again on the worker',
  { timeout: 120_000 },
  () => {
    it('maxAttempts 1,000,000 in meta.fields.policy: refused at import, naming line 2 and the field', async () => {
      const v = await victim();
      const text = tampered(
        v.lines,
        'policy-1',
        (a) => a,
        (l) =>
          l.kind === 'meta' ? { ...l, fields: { ...(l.fields as object), policy: JSON.stringify(HOSTILE_POLICY) } } : l,
      );
      const imported = await cli(['import', archiveFile(text)]);
      expect(imported.exitCode).toBe(2);
      expect(imported.stderr).toContain(
        'archive line 2: meta: fields.policy: maxAttempts: must be an integer from 1 to 100 (got 1000000); nothing was written',
      );
      await nothingWritten('policy-1');
    });

    it('a stored policy out of the schema (an import before this check): the worker runs the turn under the policy in force for those fields', async () => {
      const { sessionId } = await idle.runtime.enqueue({
        prompt: 'hello',
        options: { provider: 'fake', model: 'http401', cwd: env.cwd },
      });
      const { redis: r, store } = internals(idle.runtime);
      await r.hset(store.key(sessionId, 'meta'), 'policy', JSON.stringify(HOSTILE_POLICY));
      await idle.startWorker({
        agentOptions: { pi: piHostOptions(env, tempDir('idle-state'), tempDir('idle-sessions')) },
      });
      const session = await turnEnded(idle.runtime, sessionId, 1, 60_000);
      expect(session.state).toBe('failed');
      // maxAttempts is the global policy's (4); the rest of the stored policy (no delay, auth retried) stands, as a caller may set it.
      const attempts = new Set((await idle.runtime.readMessages(sessionId)).map((m) => m.attempt));
      expect(attempts.size).toBe(4);
      await until(async () => (await idle.runtime.getSession(sessionId))?.state === 'failed');
    });
  },
);

describe('an imported retry policy within the deployment’s bounds, and its size limits', { timeout: 120_000 }, () => {
  it('a maxTurnMs above the deployment’s maximum is refused; no delay and auth retried pass, as a caller may set them; a configured line limit is named', async () => {
    const v = await victim();
    const strict = new Runtime({
      connect: h.connect,
      prefix: h.prefix,
      policy: deploymentPolicy({ policy: { maxTurnMs: 60_000 }, workspace: tmpdir() }),
      limits: { maxArchiveLineBytes: 64 * 1024 },
    });
    try {
      const withPolicy = (sessionId: string, policy: object) =>
        tampered(
          v.lines,
          sessionId,
          (a) => a,
          (l) =>
            l.kind === 'meta' ? { ...l, fields: { ...(l.fields as object), policy: JSON.stringify(policy) } } : l,
        );
      await expect(strict.importSession(withPolicy('bounds-1', { maxTurnMs: 3_600_000 }))).rejects.toThrow(
        "archive line 2: meta: fields.policy: maxTurnMs: 3600000 is above this deployment's maximum of 60000 ms (policy.maxTurnMs)",
      );
      await nothingWritten('bounds-1');
      const loose = { maxAttempts: 100, initialDelayMs: 0, maxDelayMs: 0, retryOn: ['auth', 'startup'] };
      // The victim's agent session is in use: the copy's conversation is forked.
      expect(await strict.importSession(withPolicy('bounds-2', loose))).toMatchObject({
        sessionId: 'bounds-2',
        conversation: 'forked',
      });
      expect((await strict.getPolicy('bounds-2')).policy).toMatchObject(loose);
      const big = tampered(
        v.lines,
        'bounds-3',
        (a) => a,
        (l) => (l.kind === 'message' && l.seq === 1 ? { ...l, content: { text: 'x'.repeat(100_000) } } : l),
      );
      const at = big.split('\n').findIndex((l) => l.startsWith('{"kind":"message"')) + 1;
      await expect(strict.importSession(big)).rejects.toThrow(
        new RegExp(
          `archive line ${at}: the line is 100\\d{3} bytes, above this deployment's limit of 65536 per line \\(lifecycle\\.maxArchiveLineBytes\\)`,
        ),
      );
      await nothingWritten('bounds-3');
    } finally {
      await strict.close();
    }
  });
});

describe(
  'hostile archive fields: refused at import naming the line and the field, nothing written',
  { timeout: 120_000 },
  () => {
    it('an agent session id that is an option, a traversal file name, a 30 MB line', async () => {
      const v = await victim();
      const agentAt = (text: string) => text.split('\n').findIndex((l) => l.includes('"kind":"agent"')) + 1;
      const option = tampered(
        v.lines,
        'hostile-1',
        () => [],
        (l) => (l.kind === 'snapshot' ? withAgentSessionId(l, '--extension=/tmp/evil.ts') : l),
      );
      const traversal = tampered(v.lines, 'hostile-2', (agent) =>
        agent.map((l) => ({
          ...l,
          value: JSON.stringify({
            ...(JSON.parse(String(l.value)) as object),
            fileName: `../../../../tmp/x_${v.agentSessionId}.jsonl`,
          }),
        })),
      );
      const big = tampered(
        v.lines,
        'hostile-3',
        (a) => a,
        (l) => (l.kind === 'message' && l.seq === 1 ? { ...l, content: { text: 'x'.repeat(30 * 1024 * 1024) } } : l),
      );
      const cases: Array<[string, string, string]> = [
        [
          'hostile-1',
          option,
          'archive line 3: snapshot: value.snapshot.context.agentSessionId: must be an agent session id',
        ],
        ['hostile-2', traversal, `archive line ${agentAt(traversal)}: agent: value.fileName:`],
        [
          'hostile-3',
          big,
          `archive line ${big.split('\n').findIndex((l) => l.startsWith('{"kind":"message"')) + 1}: the line is`,
        ],
      ];
      for (const [id, text, error] of cases) {
        const imported = await cli(['import', archiveFile(text)]);
        expect(imported.exitCode, id).toBe(2);
        expect(imported.stderr, id).toContain(error);
        expect(imported.stderr, id).toContain('nothing was written');
        await nothingWritten(id);
      }
    });
  },
);
