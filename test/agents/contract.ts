import { expect } from 'vitest';
import { CliMessageSchema, isTerminal, type CliMessage } from '../../src/protocol/index.ts';

/** Assertions of the CliMessage contract that every agent's mapper tests share. */

/** The one terminal message, which must be the last. */
export function terminalOf(messages: CliMessage[]): CliMessage {
  const terminals = messages.filter(isTerminal);
  expect(terminals).toHaveLength(1);
  expect(messages.at(-1)).toBe(terminals[0]);
  return terminals[0]!;
}

/** Every message matches the contract's schema, and exactly one terminal comes last. */
export function expectContract(messages: CliMessage[]): void {
  for (const message of messages) expect(CliMessageSchema.safeParse(message).success).toBe(true);
  terminalOf(messages);
}

/** The content of the terminal message, which must be a failure. */
export function failure(messages: CliMessage[]) {
  const terminal = terminalOf(messages);
  if (terminal.type !== 'terminal.failed') throw new Error(`expected terminal.failed, got ${JSON.stringify(terminal)}`);
  return terminal.content;
}

/** One tool.call per toolCallId, before exactly one tool.completed / tool.failed. */
export function expectOneResultPerToolCall(messages: CliMessage[]): void {
  const calls = new Map<string, number>();
  const results = new Map<string, number>();
  for (const m of messages) {
    if (m.type === 'tool.call') {
      expect(results.has(m.content.toolCallId)).toBe(false);
      calls.set(m.content.toolCallId, (calls.get(m.content.toolCallId) ?? 0) + 1);
    }
    if (m.type === 'tool.completed' || m.type === 'tool.failed') {
      expect(calls.has(m.content.toolCallId)).toBe(true);
      results.set(m.content.toolCallId, (results.get(m.content.toolCallId) ?? 0) + 1);
    }
  }
  for (const id of calls.keys()) {
    expect(calls.get(id)).toBe(1);
    expect(results.get(id)).toBe(1);
  }
}
