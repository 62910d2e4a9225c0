/** A minimal Server-Sent Events reader for tests: frames as they arrive, comments included. */
export interface SseFrame {
  id?: string;
  event?: string;
  data?: string;
  retry?: string;
  comment?: string;
}

export async function* readSse(response: Response): AsyncGenerator<SseFrame> {
  if (response.body === null) return;
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value.replace(/\r\n?/g, '\n');
      for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const frame: SseFrame = {};
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) {
            frame.comment = line.slice(1).trim();
            continue;
          }
          const colon = line.indexOf(':');
          const key = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
          if (key === 'data') frame.data = frame.data === undefined ? value : `${frame.data}\n${value}`;
          else if (key === 'id' || key === 'event' || key === 'retry') frame[key] = value;
        }
        yield frame;
      }
    }
  } finally {
    reader.releaseLock();
  }
}

/** Parsed message events of an SSE stream (`data` = {seq, turn, attempt, type, content}). */
export interface StreamedMessage {
  id: string;
  event: string;
  message: { seq: number; turn: number; attempt: number; type: string; content: unknown };
}

export function asMessage(frame: SseFrame): StreamedMessage | null {
  if (frame.data === undefined || frame.id === undefined || frame.event === undefined) return null;
  return { id: frame.id, event: frame.event, message: JSON.parse(frame.data) as StreamedMessage['message'] };
}
