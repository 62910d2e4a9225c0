import { describe, expect, it } from 'vitest';
import { permissionResponseLine, readControlLine, userMessageLine } from '../../../src/agents/claude-code/control.ts';

const request = { requestId: 'req-1', toolName: 'Bash', toolUseId: 'toolu_1', input: { command: 'touch x' } };

describe("Claude Code's stream-json control protocol", () => {
  it('tells its permission prompts, other control requests and cancels apart from ordinary events', () => {
    const ask = {
      type: 'control_request',
      request_id: 'req-1',
      request: { subtype: 'can_use_tool', tool_name: 'Bash', tool_use_id: 'toolu_1', input: { command: 'touch x' } },
    };
    expect(readControlLine(JSON.stringify(ask))).toEqual({ kind: 'can_use_tool', request });
    expect(
      readControlLine(
        JSON.stringify({ type: 'control_request', request_id: 'r2', request: { subtype: 'elicitation' } }),
      ),
    ).toEqual({
      kind: 'other_request',
      requestId: 'r2',
      subtype: 'elicitation',
    });
    expect(readControlLine(JSON.stringify({ type: 'control_cancel_request', request_id: 'req-1' }))).toEqual({
      kind: 'cancel',
      requestId: 'req-1',
    });
    // An assistant text that merely mentions the protocol is an ordinary event, for the mapper.
    expect(
      readControlLine(
        JSON.stringify({ type: 'assistant', message: { content: [{ type: 'text', text: '"control_request"' }] } }),
      ),
    ).toBeNull();
    expect(readControlLine('not json "control_')).toBeNull();
  });

  it('answers a prompt allowed with the input unchanged, denied with a message for the model', () => {
    expect(JSON.parse(permissionResponseLine(request, { optionId: 'allow_once', outcome: 'allowed' }))).toEqual({
      type: 'control_response',
      response: {
        subtype: 'success',
        request_id: 'req-1',
        response: { behavior: 'allow', updatedInput: { command: 'touch x' }, toolUseID: 'toolu_1' },
      },
    });
    const denied = JSON.parse(permissionResponseLine(request, { optionId: 'reject_once', outcome: 'denied' })) as {
      response: { response: Record<string, unknown> };
    };
    expect(denied.response.response).toMatchObject({ behavior: 'deny', toolUseID: 'toolu_1' });
    expect(String(denied.response.response.message)).toContain('denied');
  });

  it('sends the prompt as one stream-json user message line', () => {
    const line = userMessageLine('line one\nline two');
    expect(line.endsWith('\n')).toBe(true);
    expect(line.slice(0, -1)).not.toContain('\n');
    expect(JSON.parse(line)).toMatchObject({
      type: 'user',
      message: { role: 'user', content: [{ type: 'text', text: 'line one\nline two' }] },
    });
  });
});
