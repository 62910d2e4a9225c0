import type { FailureCategory } from '../../protocol/index.ts';
import { classifyErrorText, type ClassifiedError } from '../shared/classify-error-text.ts';

/**
 * Codex 0.171 does not relay most model-API failures as they came: it prints its own texts
 * (measured against the fake Responses server):
 * - HTTP 500 → "We’re currently experiencing high demand, which may cause temporary errors." The
 *   server's body and status are gone. Codex raises this text for a 500 only (502/503 come through
 *   as "unexpected status 503 …") and retries it as transient, so it stands for a server-side
 *   failure: `server_error`.
 * - `response.failed` with `server_is_overloaded` → "Selected model is at capacity…": `server_error`.
 * - `response.failed` with `context_length_exceeded` → "Codex ran out of room in the model's context
 *   window…": the same request fails again, `bad_request`.
 * - HTTP 400 → the response body verbatim; an OpenAI error body says its `type` / `code`.
 * - a stream that ends without `response.completed` → "stream disconnected before completion: <why>",
 *   which Codex retries as transient: `network` unless <why> tells more.
 * Everything else ("unexpected status 401 Unauthorized: …", "exceeded retry limit, last status: 429
 * Too Many Requests", "rate limit exceeded: …") carries its status or kind in the text and goes to
 * the shared classifier.
 * Contract: pure, never throws.
 */
const CANNED: ReadonlyArray<{ pattern: RegExp; category: FailureCategory }> = [
  { pattern: /currently experiencing high demand/i, category: 'server_error' },
  { pattern: /selected model is at capacity/i, category: 'server_error' },
  { pattern: /ran out of room in the model's context window/i, category: 'bad_request' },
  { pattern: /^invalid prompt\b/i, category: 'bad_request' },
];

const STREAM_DISCONNECTED = /^stream disconnected before completion:\s*/i;

export function classifyCodexError(text: string): ClassifiedError {
  for (const { pattern, category } of CANNED) if (pattern.test(text)) return { category };
  const body = openAiErrorBody(text);
  if (body !== null) return body;
  if (STREAM_DISCONNECTED.test(text)) {
    const cause = classifyErrorText(text.replace(STREAM_DISCONNECTED, ''));
    return cause.category === 'unknown' ? { ...cause, category: 'network' } : cause;
  }
  return classifyErrorText(text);
}

/** An OpenAI error body relayed verbatim (`{"error":{"type":…,"code":…,"message":…}}`), by its type and code. */
function openAiErrorBody(text: string): ClassifiedError | null {
  if (!text.trimStart().startsWith('{')) return null;
  let error: Record<string, unknown>;
  try {
    const parsed = JSON.parse(text) as { error?: unknown };
    if (parsed.error === null || typeof parsed.error !== 'object') return null;
    error = parsed.error as Record<string, unknown>;
  } catch {
    // Not JSON: not a structured error (the caller keeps the raw text).
    return null;
  }
  const kind = `${typeof error.type === 'string' ? error.type : ''} ${typeof error.code === 'string' ? error.code : ''}`;
  const message = typeof error.message === 'string' ? error.message : '';
  const fromMessage = classifyErrorText(message);
  const hint = fromMessage.retryAfterMs === undefined ? {} : { retryAfterMs: fromMessage.retryAfterMs };
  if (/rate_limit|insufficient_quota/.test(kind)) return { category: 'rate_limited', ...hint };
  if (/authentication|permission|invalid_api_key/.test(kind)) return { category: 'auth' };
  if (/server_error|overloaded/.test(kind)) return { category: 'server_error', ...hint };
  if (/invalid_request|context_length|not_found/.test(kind)) return { category: 'bad_request' };
  return fromMessage;
}
