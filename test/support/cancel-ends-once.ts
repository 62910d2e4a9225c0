import { expect } from 'vitest';
import type { Runtime } from '../../src/runtime/runtime.ts';
import { agentRecords, turnEnded, until } from './runtime.ts';

/**
 * Every attempt ends once (issue 28), on a real agent CLI in the durable runtime: a session with
 * `options` (its agent scripted to run a long tool) is cancelled while that tool runs; its attempt
 * then ends with exactly one terminal message, `terminal.cancelled`, every tool call is closed (the
 * running one by `tool.failed` "the attempt was cancelled"), and none of its processes is left.
 */
export async function expectCancelDuringToolEndsOnce(
  runtime: Runtime,
  options: Record<string, unknown>,
): Promise<void> {
  const { sessionId } = await runtime.enqueue({ prompt: 'Run the long command', options });
  await until(
    async () => (await runtime.readMessages(sessionId)).some((m) => m.type === 'tool.call'),
    60_000,
    'the tool call',
  );
  await runtime.cancel(sessionId, 'stop the tool');
  const ended = await turnEnded(runtime, sessionId, 1, 60_000);
  expect(ended.state).toBe('cancelled');
  const log = await runtime.readMessages(sessionId);
  const terminals = log.filter((m) => m.type.startsWith('terminal.'));
  expect(terminals.map((m) => [m.attempt, m.type, m.content])).toEqual([
    [1, 'terminal.cancelled', { reason: 'stop the tool' }],
  ]);
  expect(log.at(-1)?.type).toBe('terminal.cancelled');
  const ids = (...types: string[]) =>
    log.filter((m) => types.includes(m.type)).map((m) => (m.content as { toolCallId: string }).toolCallId);
  const calls = ids('tool.call');
  expect(calls.length).toBeGreaterThan(0);
  expect(ids('tool.completed', 'tool.failed').sort()).toEqual([...calls].sort());
  expect(log.filter((m) => m.type === 'tool.failed').at(-1)?.content).toMatchObject({
    error: 'the attempt was cancelled',
  });
  expect(await agentRecords(sessionId)).toEqual([]);
}
