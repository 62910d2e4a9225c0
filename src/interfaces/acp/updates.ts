import type * as acp from '@agentclientprotocol/sdk';
import type { StoredMessage } from '../../runtime/store/session-store.ts';

/**
 * A stored message of a sessiond session as the ACP `session/update` an editor shows (null: none):
 * `assistant` → `agent_message_chunk`, `assistant.thought` → `agent_thought_chunk`, `tool.call` →
 * `tool_call` (title: the tool's name, rawInput: its arguments), `tool.update` →
 * `tool_call_update` in progress, `tool.completed` / `tool.failed` → `tool_call_update` completed
 * / failed (rawOutput: the result or error). Session, retry, approval and terminal messages are
 * sessiond's bookkeeping, not updates (approvals go to the client as `session/request_permission`).
 * Contract: pure, never throws.
 */
export function updateOf(message: StoredMessage): acp.SessionUpdate | null {
  const content = (message.content ?? {}) as Record<string, unknown>;
  const toolCallId = String(content.toolCallId ?? '');
  switch (message.type) {
    case 'assistant':
      return { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: String(content.text ?? '') } };
    case 'assistant.thought':
      return { sessionUpdate: 'agent_thought_chunk', content: { type: 'text', text: String(content.text ?? '') } };
    case 'tool.call':
      return {
        sessionUpdate: 'tool_call',
        toolCallId,
        title: String(content.name ?? 'tool'),
        status: 'pending',
        rawInput: content.arguments,
      };
    case 'tool.update':
      return { sessionUpdate: 'tool_call_update', toolCallId, status: 'in_progress', rawInput: content.arguments };
    case 'tool.completed':
      return { sessionUpdate: 'tool_call_update', toolCallId, status: 'completed', rawOutput: content.result };
    case 'tool.failed':
      return { sessionUpdate: 'tool_call_update', toolCallId, status: 'failed', rawOutput: content.error };
    default:
      return null;
  }
}

/** The messages of each turn's last attempt, in order: what a replay shows (a failed attempt's partial output was superseded by its retry). */
export function lastAttempts(messages: readonly StoredMessage[]): StoredMessage[] {
  const last = new Map<number, number>();
  for (const m of messages) last.set(m.turn, Math.max(last.get(m.turn) ?? 0, m.attempt));
  return messages.filter((m) => m.attempt === last.get(m.turn));
}

/** The text of an ACP prompt: its text blocks, and resource links by their URI. */
export function promptText(blocks: readonly acp.ContentBlock[]): string {
  const parts: string[] = [];
  for (const block of blocks) {
    if (block.type === 'text') parts.push(block.text);
    else if (block.type === 'resource_link') parts.push(block.uri);
    else if (block.type === 'resource' && 'text' in block.resource) parts.push(block.resource.text);
  }
  return parts.join('\n');
}
