/**
 * An agent's append-only JSONL session file cut just after the line that records the result of tool call
 * `toolCallId` (a prefix of its lines is a file the agent wrote, so it resumes from that result); null when the
 * file holds no such line yet. Only lines naming the call are given to `isResult` (which parses). `later`: the
 * rest of the file holds `laterCall`, a tool call written after it (the model asked for more tools, which may be
 * running); a function decides from the rest and the result's line instead. With `wholeLines`, a last line
 * without its newline is still being written and records nothing yet.
 */
export function cutAfterToolResult(
  content: string,
  toolCallId: string,
  how: {
    isResult: (line: string, toolCallId: string) => boolean;
    laterCall: string | ((rest: string, line: string) => boolean);
    wholeLines: boolean;
  },
): { content: string; later: boolean } | null {
  let start = 0;
  while (start < content.length) {
    const newline = content.indexOf('\n', start);
    if (newline === -1 && how.wholeLines) return null;
    const end = newline === -1 ? content.length : newline + 1;
    const line = content.slice(start, end);
    if (line.includes(toolCallId) && how.isResult(line, toolCallId)) {
      const rest = content.slice(end);
      const later = typeof how.laterCall === 'string' ? rest.includes(how.laterCall) : how.laterCall(rest, line);
      return { content: content.slice(0, end), later };
    }
    start = end;
  }
  return null;
}
