import type * as acp from '@agentclientprotocol/sdk';
import type { AgentProcess } from '../../process/index.ts';
import type { InvalidLines } from '../shared/invalid-lines.ts';

/**
 * The JSON-RPC streams of the SDK's client over an agent process: one message per stdout line (a
 * line that is not a JSON object goes to `invalid`, reported with the terminal), each message
 * written to stdin as a line (dropped once stdin is closed).
 */
export function rpcStreams(
  agent: AgentProcess,
  invalid: InvalidLines,
): { readable: ReadableStream<acp.AnyMessage>; writable: WritableStream<acp.AnyMessage> } {
  let lineNumber = 0;
  const lines = agent.lines()[Symbol.asyncIterator]();
  const readable = new ReadableStream<acp.AnyMessage>({
    pull: async (controller) => {
      for (;;) {
        const next = await lines.next();
        if (next.done === true) {
          controller.close();
          return;
        }
        lineNumber += 1;
        const line = next.value;
        if (line.trim() === '') continue;
        try {
          const message = JSON.parse(line) as unknown;
          if (message !== null && typeof message === 'object' && !Array.isArray(message)) {
            controller.enqueue(message as acp.AnyMessage);
            return;
          }
        } catch {
          // not JSON: reported with the terminal
        }
        invalid.add(lineNumber, line, 'not a JSON-RPC message');
      }
    },
  });
  const stdin = agent.stdin;
  const writable = new WritableStream<acp.AnyMessage>({
    write: (message) =>
      new Promise<void>((resolveWrite) => {
        if (stdin === null || !stdin.writable) return resolveWrite();
        stdin.write(`${JSON.stringify(message)}\n`, () => resolveWrite());
      }),
  });
  return { readable, writable };
}
