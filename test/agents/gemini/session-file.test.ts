import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  exportGeminiSession,
  geminiStateAfterTool,
  importGeminiSession,
  type GeminiSessionState,
} from '../../../src/agents/gemini/session-file.ts';
import { gemini } from '../../../src/agents/gemini/definition.ts';
import { managedHomeForOptions } from '../../../src/agents/gemini/home.ts';
import { GEMINI_FIXTURES } from './transcripts.ts';

const ID = '9c79b212-49e7-48db-ad15-9ada8ce1be06';
const FILE = 'session-2026-11-29T22-03-9c79b212.jsonl';
const HEADER = JSON.stringify({ sessionId: ID, projectHash: 'h', startTime: 't', lastUpdated: 't', kind: 'main' });
const CONTENT = `${HEADER}\n{"id":"1","type":"user","content":[{"text":"hi"}]}\n`;

let root: string;
let home: string;
let cwd: string;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'gemini-session-'));
  home = join(root, 'home');
  cwd = join(root, 'work');
  mkdirSync(cwd, { recursive: true });
});

afterEach(() => {
  rmSync(root, { recursive: true, force: true });
});

function chatsOf(slug: string): string[] {
  return readdirSync(join(home, '.gemini', 'tmp', slug, 'chats'));
}

describe('gemini chat files travelling with the session', () => {
  it('exports the chat file of the session, from whatever project holds it', async () => {
    const chats = join(home, '.gemini', 'tmp', 'some-project', 'chats');
    mkdirSync(chats, { recursive: true });
    writeFileSync(join(chats, FILE), CONTENT);
    writeFileSync(join(chats, 'session-2026-11-29T22-03-9c79b212x.jsonl'), 'not a chat name');
    expect(await exportGeminiSession(home, ID)).toEqual({ version: 1, fileName: FILE, content: CONTENT });
    expect(await exportGeminiSession(home, '9c79b212-0000-4000-8000-000000000000')).toBeNull();
    expect(await exportGeminiSession(join(root, 'nowhere'), ID)).toBeNull();
  });

  it('imports into a new project slug for the cwd, with the marker gemini adopts', async () => {
    await importGeminiSession(home, { version: 1, fileName: FILE, content: CONTENT }, cwd);
    const [slug] = readdirSync(join(home, '.gemini', 'tmp'));
    expect(slug).toMatch(/^sessiond-[0-9a-f]{12}$/);
    expect(readFileSync(join(home, '.gemini', 'tmp', slug!, '.project_root'), 'utf8')).toBe(cwd);
    expect(chatsOf(slug!)).toEqual([FILE]);
  });

  it('imports into the slug projects.json maps the cwd to, or the one whose .project_root names it (symlinks resolved)', async () => {
    mkdirSync(join(home, '.gemini', 'tmp', 'work'), { recursive: true });
    writeFileSync(join(home, '.gemini', 'projects.json'), JSON.stringify({ projects: { [cwd]: 'work' } }));
    await importGeminiSession(home, { version: 1, fileName: FILE, content: CONTENT }, cwd);
    expect(chatsOf('work')).toEqual([FILE]);

    rmSync(join(home, '.gemini'), { recursive: true });
    mkdirSync(join(home, '.gemini', 'tmp', 'work-1'), { recursive: true });
    writeFileSync(join(home, '.gemini', 'tmp', 'work-1', '.project_root'), `${cwd}\n`);
    symlinkSync(cwd, join(root, 'link'));
    await importGeminiSession(home, { version: 1, fileName: FILE, content: CONTENT }, join(root, 'link'));
    expect(chatsOf('work-1')).toEqual([FILE]);
  });

  it('keeps a local copy that is the same or further along; replaces an older one', async () => {
    const state: GeminiSessionState = { version: 1, fileName: FILE, content: CONTENT };
    await importGeminiSession(home, state, cwd);
    const [slug] = readdirSync(join(home, '.gemini', 'tmp'));
    const path = join(home, '.gemini', 'tmp', slug!, 'chats', FILE);
    const longer = `${CONTENT}{"id":"2","type":"gemini","content":"hello"}\n`;
    writeFileSync(path, longer);
    await importGeminiSession(home, state, cwd);
    expect(readFileSync(path, 'utf8')).toBe(longer);
    await importGeminiSession(home, { ...state, content: `${longer}{"id":"3"}\n` }, cwd);
    expect(readFileSync(path, 'utf8')).toBe(`${longer}{"id":"3"}\n`);
  });

  it('exact (a workspace going back to its recorded point): the stored chat replaces a local copy further along', async () => {
    const options = { configDir: join(root, 'user-gemini'), cwd, env: { SESSIOND_STATE_DIR: join(root, 'state') } };
    const managed = managedHomeForOptions(options, options.env);
    const state: GeminiSessionState = { version: 1, fileName: FILE, content: CONTENT };
    await importGeminiSession(managed, state, cwd);
    const [slug] = readdirSync(join(managed, '.gemini', 'tmp'));
    const path = join(managed, '.gemini', 'tmp', slug!, 'chats', FILE);
    writeFileSync(path, `${CONTENT}{"id":"2","type":"gemini","content":"a cancelled tool call"}\n`);
    await gemini.importState?.(options, ID, JSON.stringify(state), { exact: true });
    expect(readFileSync(path, 'utf8')).toBe(CONTENT);
  });

  it('refuses a file name gemini would not write and an unknown state version', async () => {
    await expect(
      importGeminiSession(home, { version: 1, fileName: '../../evil.jsonl', content: '' }, cwd),
    ).rejects.toThrow(/not one gemini writes/);
    await expect(importGeminiSession(home, { version: 2 as 1, fileName: FILE, content: '' }, cwd)).rejects.toThrow(
      /version 2/,
    );
  });
});

/**
 * The cut of gemini's chat file after a batch of completed tool calls, on chat files the real `gemini` (0.61)
 * wrote (test/agents/record-session-cuts.ts): `cancel-second-tool` (a command completed, a second one was
 * interrupted by SIGINT), `two-tools` (two calls in one response).
 */
describe("gemini chat file cut after a tool call's result", () => {
  const dir = join(GEMINI_FIXTURES, 'session-cuts');
  const read = (name: string, kind: 'stdout' | 'session'): string =>
    readFileSync(join(dir, `${name}.${kind}.jsonl`), 'utf8');
  const chat = (content: string): GeminiSessionState => ({ version: 1, fileName: FILE, content });
  const linesOf = (content: string): string[] => content.split(/(?<=\n)/);
  const prefix = (content: string, n: number): string => linesOf(content).slice(0, n).join('');
  /** The tool call ids the run printed (`tool_use`), in order. */
  const toolIds = (name: string): string[] =>
    read(name, 'stdout')
      .split('\n')
      .filter((line) => line.includes('"tool_use"'))
      .map((line) => (JSON.parse(line) as { tool_id: string }).tool_id);
  /** The index of the model record whose toolCalls hold the call's result. */
  const resultLine = (content: string, id: string): number =>
    linesOf(content).findIndex(
      (line) => line.includes('"toolCalls"') && line.includes(id) && line.includes('"result"'),
    );

  it("a cancel during the second call: cut just after the first call's result, not its user record, nothing of the second", () => {
    const content = read('cancel-second-tool', 'session');
    const [first, second] = toolIds('cancel-second-tool');
    const line = resultLine(content, first!);
    expect(line).toBeGreaterThan(0);
    const cut = geminiStateAfterTool(chat(content), first!);
    expect(cut?.state.content).toBe(prefix(content, line + 1));
    expect(cut?.state.content).toContain('ok0');
    // The next line, a `user` record with the same function response (resume would send it twice), is left out.
    expect(linesOf(content)[line + 1]).toContain('"functionResponse"');
    expect(cut?.state.content.match(/"functionResponse"/g)?.length).toBe(1);
    expect(cut?.state.content).not.toContain(second);
    // The whole file holds the model's next message: a call in it may be running.
    expect(cut?.later).toBe(true);
    // As the file stood with the user record written (the results sent), the model not answered yet: not later.
    expect(geminiStateAfterTool(chat(prefix(content, line + 3)), first!)).toEqual({ state: cut?.state, later: false });
    // Before the result was recorded (the model's message without its calls), or the line torn: no cut yet.
    expect(geminiStateAfterTool(chat(prefix(content, line)), first!)).toBeNull();
    expect(geminiStateAfterTool(chat(prefix(content, line + 1).slice(0, -1)), first!)).toBeNull();
    // The interrupted call was never recorded.
    expect(geminiStateAfterTool(chat(content), second!)).toBeNull();
  });

  it('two calls in one response: both results are recorded on one line', () => {
    const content = read('two-tools', 'session');
    const ids = toolIds('two-tools');
    expect(ids.length).toBe(2);
    const line = resultLine(content, ids[1]!);
    const cuts = ids.map((id) => geminiStateAfterTool(chat(content), id));
    expect(cuts.map((cut) => cut?.state.content)).toEqual([prefix(content, line + 1), prefix(content, line + 1)]);
    expect(cuts[0]?.state.content).toContain('ok1');
    expect(cuts[0]?.state.content).not.toContain('Done.');
    expect(cuts.map((cut) => cut?.later)).toEqual([true, true]);
  });

  it("the definition's stateAfterTool cuts its exported state", () => {
    const content = read('cancel-second-tool', 'session');
    const [first] = toolIds('cancel-second-tool');
    const cut = gemini.stateAfterTool?.(JSON.stringify(chat(content)), first!, { toolCallsEnded: 1 });
    expect(JSON.parse(cut?.state ?? 'null')).toEqual(geminiStateAfterTool(chat(content), first!)?.state);
    expect(cut?.later).toBe(true);
  });
});
