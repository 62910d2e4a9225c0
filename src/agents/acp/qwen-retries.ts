import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { MessageOf } from '../../protocol/index.ts';

/** What Qwen Code calls itself in its `initialize` answer (`agentInfo.name`). */
export const QWEN_AGENT_NAME = 'qwen-code';
/** The chat file is read only up to this many bytes from its end: its last turns. */
const MAX_READ_BYTES = 4 * 1024 * 1024;

export interface QwenChat {
  /** The agent's environment (its HOME, or QWEN_HOME, says where its chats are). */
  env: Readonly<Record<string, string>>;
  cwd: string;
  sessionId: string;
  /** Only the telemetry of this attempt: events from this time on (ms). */
  since: number;
}

/**
 * Qwen Code (0.24) retries a failed model request by itself (the OpenAI-compatible client's
 * retries; `generationConfig.maxRetries: 0` does not stop them on a 5xx), and says so nowhere in
 * ACP nor on stderr. What it does record is a `qwen-code.api_error` telemetry event per failed
 * request in its chat file, `<QWEN_HOME or HOME/.qwen>/projects/<cwd, non-alphanumerics as
 * "-">/chats/<sessionId>.jsonl`. Read after the attempt's prompt answered: each api_error of
 * this session's own prompts (not a subagent's) that another request of the same prompt
 * followed was retried → `agent.retry` start (its attempt number, the error's text); then one
 * `agent.retry` end, success when the last request of the prompt was answered.
 * Contract: never throws; nothing when the file is missing or says nothing of retries.
 */
export async function qwenRetries(chat: QwenChat): Promise<Array<MessageOf<'agent.retry'>>> {
  const root = chat.env.QWEN_HOME ?? (chat.env.HOME === undefined ? undefined : join(chat.env.HOME, '.qwen'));
  if (root === undefined) return [];
  const file = join(root, 'projects', chat.cwd.replace(/[^a-zA-Z0-9]/g, '-'), 'chats', `${chat.sessionId}.jsonl`);
  // No chat file (not written yet, or removed): no retries to report.
  const text = await readFile(file, 'utf8').catch(() => '');
  return retriesOf(text.length > MAX_READ_BYTES ? text.slice(-MAX_READ_BYTES) : text, chat.sessionId, chat.since);
}

interface ApiEvent {
  promptId: string;
  ok: boolean;
  errorText: string;
}

/** The retries in a Qwen chat file's text (see qwenRetries). Pure. */
export function retriesOf(text: string, sessionId: string, since: number): Array<MessageOf<'agent.retry'>> {
  const byPrompt = new Map<string, ApiEvent[]>();
  for (const line of text.split('\n')) {
    const event = apiEvent(line, sessionId, since);
    if (event === null) continue;
    const list = byPrompt.get(event.promptId) ?? [];
    list.push(event);
    byPrompt.set(event.promptId, list);
  }
  const out: Array<MessageOf<'agent.retry'>> = [];
  for (const events of byPrompt.values()) {
    const retried = events.slice(0, -1).filter((e) => !e.ok);
    if (retried.length === 0) continue;
    retried.forEach((e, i) =>
      out.push({ type: 'agent.retry', content: { phase: 'start', attempt: i + 1, errorText: e.errorText } }),
    );
    out.push({ type: 'agent.retry', content: { phase: 'end', success: events.at(-1)?.ok === true } });
  }
  return out;
}

function apiEvent(line: string, sessionId: string, since: number): ApiEvent | null {
  if (!line.includes('qwen-code.api_')) return null;
  let record: { subtype?: unknown; systemPayload?: { uiEvent?: Record<string, unknown> } };
  try {
    record = JSON.parse(line) as typeof record;
  } catch {
    // A line that is not JSON is not a retry record.
    return null;
  }
  const event = record?.systemPayload?.uiEvent;
  if (record.subtype !== 'ui_telemetry' || event === undefined || event === null) return null;
  const name = event['event.name'];
  const promptId = event.prompt_id;
  const at = Date.parse(String(event['event.timestamp'] ?? ''));
  if (name !== 'qwen-code.api_error' && name !== 'qwen-code.api_response') return null;
  // This session's own prompts (`<sessionId>########<n>`), not a subagent's.
  if (typeof promptId !== 'string' || !promptId.startsWith(`${sessionId}########`) || event.subagent_name !== undefined)
    return null;
  if (!Number.isFinite(at) || at < since) return null;
  const status = typeof event.status_code === 'number' ? ` (status ${event.status_code})` : '';
  return {
    promptId,
    ok: name === 'qwen-code.api_response',
    errorText: `${String(event.error_message ?? 'model request failed').slice(0, 2000)}${status}`,
  };
}
