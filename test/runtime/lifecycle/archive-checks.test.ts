import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { importGeminiSession } from '../../../src/agents/gemini/session-file.ts';
import { importPiSession } from '../../../src/agents/pi/session-file.ts';
import { checkClaudeState } from '../../../src/agents/claude-code/session-file.ts';
import { checkCodexState } from '../../../src/agents/codex/session-file.ts';
import { checkGeminiState } from '../../../src/agents/gemini/session-file.ts';
import { checkPiState } from '../../../src/agents/pi/session-file.ts';
import { DEFAULT_RETRY_POLICY } from '../../../src/retry/policy.ts';
import { storedRetryPolicy } from '../../../src/runtime/deployment-policy.ts';
import { checkAgentLine, checkMetaFields } from '../../../src/runtime/lifecycle/archive-checks.ts';
import { readArchive, writeArchive, type Archive } from '../../../src/runtime/lifecycle/archive.ts';

/**
 * The rules an archive's fields are checked by at import (pure logic; the real-pi cases, with the
 * CLI and a worker, are in import-hostile.test.ts and transfer.test.ts).
 */

const ID = '0b9e0c3e-1111-4a4a-9b9b-000000000001';
const OTHER = '7f7f7f7f-2222-4b4b-8c8c-000000000002';
const pi = (fileName: string, content = '{"type":"session"}\n') => JSON.stringify({ fileName, content });

describe('agent state, by each agent’s own rules', () => {
  it('pi: its own file, by name, no folder; an id that is not an option', () => {
    expect(checkPiState(pi(`2026-12-01T10-00-00-000Z_${ID}.jsonl`), ID).fileName).toBe(
      `2026-12-01T10-00-00-000Z_${ID}.jsonl`,
    );
    expect(() => checkPiState(pi(`2026-12-01T10-00-00-000Z_${OTHER}.jsonl`), ID)).toThrow(
      `value.fileName: "2026-12-01T10-00-00-000Z_${OTHER}.jsonl" is the file of pi session ${OTHER}`,
    );
    expect(() => checkPiState(pi(`../../etc/x_${ID}.jsonl`), ID)).toThrow(
      /^value\.fileName: .* is not a file name pi writes/,
    );
    expect(() => checkPiState(pi(`/tmp/x_${ID}.jsonl`), ID)).toThrow(/^value\.fileName:/);
    expect(() => checkPiState(pi(`x_${ID}.jsonl`), '--extension')).toThrow(
      /^field: "--extension" is not a pi session id/,
    );
    expect(() => checkPiState('not json', ID)).toThrow(/^value: not JSON/);
    expect(() => checkPiState(JSON.stringify({ fileName: `x_${ID}.jsonl`, content: '', mode: 'x' }), ID)).toThrow(
      /^value\.mode: unknown field/,
    );
    expect(() => checkPiState(JSON.stringify({ fileName: `x_${ID}.jsonl`, content: 1 }), ID)).toThrow(
      'value.content: must be a string',
    );
  });

  it('claude-code, codex, gemini: a UUID, and a file that is that session’s own', () => {
    expect(() => checkClaudeState(JSON.stringify({ version: 1, projectDir: '-w', content: '' }), ID)).not.toThrow();
    expect(() => checkClaudeState(JSON.stringify({ version: 1, projectDir: '..', content: '' }), ID)).toThrow(
      /^value\.projectDir:/,
    );
    expect(() => checkClaudeState(JSON.stringify({ version: 1, projectDir: '-w', content: '' }), '-r')).toThrow(
      /^field:/,
    );
    const rollout = (id: string) =>
      JSON.stringify({ version: 1, path: `2026/12/01/rollout-2026-12-01T10-00-00-${id}.jsonl`, content: '' });
    expect(() => checkCodexState(rollout(ID), ID)).not.toThrow();
    expect(() => checkCodexState(rollout(OTHER), ID)).toThrow(/^value\.path: .* is the rollout of thread/);
    expect(() =>
      checkCodexState(JSON.stringify({ version: 1, path: `../../2026/12/01/rollout-x-${ID}.jsonl`, content: '' }), ID),
    ).toThrow(/^value\.path:/);
    const chat = (name: string, headerId: string) =>
      JSON.stringify({ version: 1, fileName: name, content: `${JSON.stringify({ sessionId: headerId })}\n` });
    expect(() => checkGeminiState(chat(`session-2026-12-01T10-00-${ID.slice(0, 8)}.jsonl`, ID), ID)).not.toThrow();
    expect(() => checkGeminiState(chat(`session-2026-12-01T10-00-${OTHER.slice(0, 8)}.jsonl`, ID), ID)).toThrow(
      /^value\.fileName: .* is not a chat file of session/,
    );
    // The victim's file name, its id's first 8 characters chosen to match: the header gives it away.
    expect(() => checkGeminiState(chat(`session-2026-12-01T10-00-${ID.slice(0, 8)}.jsonl`, OTHER), ID)).toThrow(
      /^value\.content: its first line does not name session/,
    );
  });

  it('an agent line matches the snapshot: its agent session is the snapshot’s or one the log started', () => {
    const state = pi(`x_${ID}.jsonl`);
    expect(() => checkAgentLine(`pi:${ID}`, state, new Set([ID]), ID)).not.toThrow();
    expect(() => checkAgentLine(`pi:${ID}`, state, new Set([OTHER]), OTHER)).toThrow(
      /^field: agent session ".*" does not match the snapshot/,
    );
    expect(() => checkAgentLine(`nope:${ID}`, state, new Set([ID]), ID)).toThrow(
      /^field: agent "nope" is not one this sessiond knows/,
    );
    expect(() => checkAgentLine('pi:-x', state, new Set(['-x']), '-x')).toThrow(
      /^field: "-x" must be an agent session id/,
    );
  });
});

describe('a legitimate archive with more than one agent conversation', () => {
  it('keeps the state of an older conversation its log started, next to the snapshot’s', () => {
    const archive: Archive = {
      sessionId: 's1',
      exportedAt: 1,
      meta: { state: 'completed' },
      snapshot: { version: 1, snapshot: { value: 'completed', context: { sessionId: 's1', agentSessionId: ID } } },
      history: [],
      messages: [
        { seq: 1, turn: 1, attempt: 1, type: 'session.started', content: { sessionId: OTHER } },
        { seq: 2, turn: 2, attempt: 1, type: 'session.started', content: { sessionId: ID } },
      ],
      agent: [
        [`pi:${OTHER}`, pi(`t_${OTHER}.jsonl`)],
        [`pi:${ID}`, pi(`t_${ID}.jsonl`)],
      ],
      inbox: [],
    };
    expect(readArchive(writeArchive(archive)).agent).toEqual(archive.agent);
    // Without the message that started it, the older line matches nothing of this session.
    expect(() =>
      readArchive(writeArchive({ ...archive, messages: archive.messages.slice(1).map((m) => ({ ...m, seq: 1 })) })),
    ).toThrow(/archive line 5: agent: field: agent session ".*" does not match the snapshot/);
  });
});

describe('the worker checks a stored state again before it writes a file', () => {
  const root = mkdtempSync(join(tmpdir(), 'sessiond-state-check-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('pi: a state whose file is another session’s is refused, nothing written', async () => {
    const dir = join(root, 'pi');
    mkdirSync(dir);
    await expect(
      importPiSession(dir, { fileName: `x_${OTHER}.jsonl`, content: '{"type":"session"}\n' }, undefined, ID),
    ).rejects.toThrow(`is not the one of session ${ID}`);
    expect(readdirSync(dir)).toEqual([]);
    await importPiSession(dir, { fileName: `x_${ID}.jsonl`, content: '{"type":"session"}\n' }, undefined, ID);
    expect(readdirSync(dir)).toEqual([`x_${ID}.jsonl`]);
  });

  it('gemini: a chat file of that name holding another session’s chat is never replaced', async () => {
    const home = join(root, 'gemini');
    const cwd = join(root, 'work');
    mkdirSync(cwd, { recursive: true });
    const fileName = `session-2026-12-01T10-00-${ID.slice(0, 8)}.jsonl`;
    await importGeminiSession(
      home,
      { version: 1, fileName, content: `${JSON.stringify({ sessionId: OTHER })}\nvictim\n` },
      cwd,
    );
    const [project] = readdirSync(join(home, '.gemini', 'tmp'));
    const path = join(home, '.gemini', 'tmp', String(project), 'chats', fileName);
    await expect(
      importGeminiSession(home, { version: 1, fileName, content: `${JSON.stringify({ sessionId: ID })}\n` }, cwd),
    ).rejects.toThrow("holds another session's chat");
    expect(readFileSync(path, 'utf8')).toBe(`${JSON.stringify({ sessionId: OTHER })}\nvictim\n`);
  });
});

describe('the retry policy of an archive, by its schema', () => {
  it('a policy out of the schema is refused naming the field; a valid one is completed by the schema', () => {
    expect(() => checkMetaFields({ policy: JSON.stringify({ maxAttempts: 1_000_000, initialDelayMs: 0 }) })).toThrow(
      'fields.policy: maxAttempts: must be an integer from 1 to 100 (got 1000000)',
    );
    expect(() => checkMetaFields({ policy: '{' })).toThrow('fields.policy: not JSON');
    expect(() => checkMetaFields({ policy: JSON.stringify({ lease: 1 }) })).toThrow(
      /^fields\.policy: lease: unknown field/,
    );
    expect(JSON.parse(checkMetaFields({ policy: JSON.stringify({ maxAttempts: 7 }) }).policy ?? '{}')).toEqual({
      ...DEFAULT_RETRY_POLICY,
      maxAttempts: 7,
    });
    expect(() => checkMetaFields({ state: 'owned' })).toThrow(/^fields\.state: must be one of/);
    expect(() => checkMetaFields({ retention: '-1' })).toThrow(/^fields\.retention:/);
    expect(() => checkMetaFields({ options: '[]' })).toThrow('fields.options: must be a JSON object');
  });

  it('on the worker, a stored policy out of the schema takes the policy in force for the fields at fault', async () => {
    const inForce = { ...DEFAULT_RETRY_POLICY, maxAttempts: 3 };
    const fallback = () => Promise.resolve(inForce);
    const stored = await storedRetryPolicy(
      JSON.stringify({
        ...DEFAULT_RETRY_POLICY,
        maxAttempts: 1_000_000,
        initialDelayMs: 0,
        retryOn: ['auth', 'startup'],
      }),
      fallback,
    );
    expect(stored).toEqual({
      ...DEFAULT_RETRY_POLICY,
      maxAttempts: 3,
      initialDelayMs: 0,
      retryOn: ['auth', 'startup'],
    });
    expect(
      await storedRetryPolicy(
        JSON.stringify({ ...DEFAULT_RETRY_POLICY, initialDelayMs: 5000, maxDelayMs: 10 }),
        fallback,
      ),
    ).toEqual({
      ...DEFAULT_RETRY_POLICY,
      initialDelayMs: 5000,
      maxDelayMs: 60_000,
    });
    expect(await storedRetryPolicy('not json', fallback)).toEqual(inForce);
    expect(await storedRetryPolicy('[1]', fallback)).toEqual(inForce);
    const valid = { ...DEFAULT_RETRY_POLICY, maxAttempts: 9 };
    expect(await storedRetryPolicy(JSON.stringify(valid), fallback)).toEqual(valid);
  });
});
