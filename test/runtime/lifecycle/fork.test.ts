import { describe, expect, it } from 'vitest';
import { forkConversation } from '../../../src/runtime/lifecycle/fork.ts';

/** `import --as` a new id: the copy's agent conversation (pure logic; the real-pi case is in transfer.test.ts). */

const OLD = '0b9e0c3e-1111-4a4a-9b9b-000000000001';
const NEW = '7f7f7f7f-2222-4b4b-8c8c-000000000002';
const piState = JSON.stringify({
  fileName: `2026-12-01T10-00-00-000Z_${OLD}.jsonl`,
  content: `${JSON.stringify({ type: 'session', id: OLD, cwd: '/w' })}\n{"type":"message","id":"e1"}\n`,
});

describe('forkConversation', () => {
  it('gives pi’s session file a new id: its name and header, the entries unchanged', () => {
    const forked = forkConversation(OLD, [[`pi:${OLD}`, piState]], () => NEW);
    expect(forked).toMatchObject({ agentSessionId: NEW, conversation: 'forked' });
    expect(forked.agent.map(([field]) => field)).toEqual([`pi:${NEW}`]);
    const state = JSON.parse(forked.agent[0]?.[1] ?? '{}') as { fileName: string; content: string };
    expect(state.fileName).toBe(`2026-12-01T10-00-00-000Z_${NEW}.jsonl`);
    const [header, entry] = state.content.split('\n');
    expect(JSON.parse(header ?? '{}')).toEqual({ type: 'session', id: NEW, cwd: '/w' });
    expect(entry).toBe('{"type":"message","id":"e1"}');
  });

  it('an agent that cannot fork, or a state it cannot read, starts a new conversation instead of sharing one', () => {
    expect(forkConversation(OLD, [[`claude-code:${OLD}`, '{"version":1}']], () => NEW)).toEqual({
      agentSessionId: null,
      agent: [],
      conversation: 'new',
    });
    expect(forkConversation(OLD, [[`pi:${OLD}`, 'not json']], () => NEW)).toEqual({
      agentSessionId: null,
      agent: [],
      conversation: 'new',
    });
    // A state of an older agent session (not the one the snapshot resumes) is not carried.
    expect(forkConversation(OLD, [[`pi:${NEW}`, piState]], () => NEW).conversation).toBe('new');
    expect(forkConversation(null, [], () => NEW)).toEqual({ agentSessionId: null, agent: [], conversation: 'kept' });
  });
});
