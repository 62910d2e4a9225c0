import { open } from 'node:fs/promises';
import { join } from 'node:path';
import type { MessageOf } from '../../protocol/index.ts';

/** What OpenCode calls itself in its `initialize` answer (`agentInfo.name`). */
export const OPENCODE_AGENT_NAME = 'OpenCode';
/** The log is read only up to this many bytes from its end. */
const MAX_READ_BYTES = 4 * 1024 * 1024;

export interface OpencodeLog {
  /** The agent's environment (XDG_DATA_HOME, else HOME, says where its log is). */
  env: Readonly<Record<string, string>>;
  sessionId: string;
  /** Only this attempt's lines: from this time on (ms). */
  since: number;
}

/**
 * OpenCode (1.18) retries a failed model request by itself (up to 5 times, hard-coded) and says
 * nothing of it over ACP. Its log, `<XDG_DATA_HOME or HOME/.local/share>/opencode/log/opencode.log`
 * (appended by every run), has a `message=stream` line when a request of a session starts and a
 * `message="stream error"` line when one fails, with `session.id=` and `small=` (its title
 * requests). Read after the attempt's prompt answered: each failed request of this session (not a
 * title request) that another one followed was retried → `agent.retry` start (its number, the
 * error); then one `agent.retry` end, success when the last request did not fail.
 * Contract: never throws; nothing when the log is missing or says nothing of retries.
 */
export async function opencodeRetries(log: OpencodeLog): Promise<Array<MessageOf<'agent.retry'>>> {
  const data =
    log.env.XDG_DATA_HOME ?? (log.env.HOME === undefined ? undefined : join(log.env.HOME, '.local', 'share'));
  if (data === undefined) return [];
  return retriesInLog(await tail(join(data, 'opencode', 'log', 'opencode.log')), log.sessionId, log.since);
}

async function tail(file: string): Promise<string> {
  try {
    const handle = await open(file, 'r');
    try {
      const { size } = await handle.stat();
      const length = Math.min(size, MAX_READ_BYTES);
      const buffer = Buffer.alloc(length);
      await handle.read(buffer, 0, length, size - length);
      return buffer.toString('utf8');
    } finally {
      await handle.close();
    }
  } catch {
    // No readable retry log: no retries to report.
    return '';
  }
}

/** The retries in OpenCode's log text (see opencodeRetries). Pure. */
export function retriesInLog(text: string, sessionId: string, since: number): Array<MessageOf<'agent.retry'>> {
  const events: Array<{ failed: boolean; errorText: string }> = [];
  for (const line of text.split('\n')) {
    if (!line.includes(` session.id=${sessionId} `) || !line.includes(' small=false')) continue;
    const at = Date.parse(/^timestamp=(\S+)/.exec(line)?.[1] ?? '');
    if (!Number.isFinite(at) || at < since) continue;
    if (line.includes(' message=stream ')) events.push({ failed: false, errorText: '' });
    else if (line.includes(' message="stream error" ')) {
      const last = events.at(-1);
      const errorText = (/ error\.error=("(?:[^"\\]|\\.)*"|\S+)/.exec(line)?.[1] ?? 'model request failed')
        .replace(/^"|"$/g, '')
        .slice(0, 2000);
      if (last !== undefined && !last.failed) Object.assign(last, { failed: true, errorText });
      else events.push({ failed: true, errorText });
    }
  }
  const retried = events.slice(0, -1).filter((e) => e.failed);
  if (retried.length === 0) return [];
  return [
    ...retried.map((e, i): MessageOf<'agent.retry'> => ({
      type: 'agent.retry',
      content: { phase: 'start', attempt: i + 1, errorText: e.errorText },
    })),
    { type: 'agent.retry', content: { phase: 'end', success: events.at(-1)?.failed === false } },
  ];
}
