import type { FailureCategory } from '../../protocol/index.ts';
import { categoryForStatus, classifyErrorText } from '../shared/classify-error-text.ts';
import type { FailureFacts } from '../shared/terminal.ts';

/**
 * How gemini 0.61 reports a failure, and what sessiond makes of it. Measured against a fake
 * Gemini API (test/fixtures/gemini/):
 * - An API error ends with `{"type":"result","status":"error","error":{"type":"unknown","message":
 *   "[API Error: …]"}}` and the process exits with the error's numeric code, truncated to 8 bits
 *   by the OS: HTTP 400 → 144, 401 → 145, 429 → 173, 500 → 244, 503 → 247. The message embeds
 *   Google's error JSON (`"code":500`) for most statuses, but not for 429/503, which gemini
 *   rewrites as quota errors ("Resource has been exhausted", "The model is overloaded").
 * - gemini's own fatal errors exit with fixed codes: 41 auth settings (e.g. no GEMINI_API_KEY),
 *   42 bad input (e.g. `--resume` of a session it does not have), 44 sandbox, 52 config,
 *   53 turn limit, 54 fatal tool error, 55 untrusted folder, 130 cancelled.
 * - A response gemini cannot use (empty, blocked, truncated) is an `error` event followed by a
 *   `result` with status error and no `error` field, and exit 0.
 * Contract: pure, never throws.
 */
const EXIT_CATEGORIES: Record<number, { category: FailureCategory; what: string }> = {
  41: { category: 'auth', what: 'its auth settings are unusable (exit 41, e.g. no GEMINI_API_KEY)' },
  42: { category: 'bad_request', what: 'it rejected its input (exit 42, e.g. --resume of a session it does not have)' },
  44: { category: 'startup', what: 'its sandbox could not start (exit 44)' },
  52: { category: 'startup', what: 'its configuration is invalid (exit 52)' },
  53: { category: 'unknown', what: 'it reached its session turn limit (exit 53)' },
  54: { category: 'unknown', what: 'a tool failed fatally (exit 54)' },
  55: { category: 'startup', what: 'it does not trust the folder (exit 55)' },
  130: { category: 'process_crash', what: 'it was cancelled (exit 130)' },
};

/** The HTTP status an exit code stands for: gemini exits with the status truncated to 8 bits. */
export function statusFromExitCode(exitCode: number | null): number | undefined {
  if (exitCode === null || exitCode < 144 || exitCode > 255) return undefined;
  return exitCode + 256;
}

/** `"code":500` in the Google error JSON that gemini embeds in its message. */
export function embeddedStatus(message: string): number | undefined {
  const match = /"code"\s*:\s*(\d{3})\b/.exec(message);
  const status = match?.[1] === undefined ? undefined : Number(match[1]);
  return status !== undefined && status >= 400 && status <= 599 ? status : undefined;
}

/** `"retryDelay": "7s"` (google.rpc.RetryInfo) in the message, in ms. */
function retryDelayMs(message: string): number | undefined {
  const match = /"retryDelay"\s*:\s*"(\d+(?:\.\d+)?)s"/.exec(message);
  return match?.[1] === undefined ? undefined : Math.round(Number(match[1]) * 1000);
}

/** gemini's own text for an empty response says it is transient. */
const TRANSIENT_EMPTY_RESPONSE = /empty response with no text or thoughts/i;

/** The failure of an attempt whose `result` said `status: "error"`. */
export function resultFailure(message: string, exitCode: number | null): FailureFacts {
  const classified = classifyErrorText(message);
  const status = embeddedStatus(message) ?? statusFromExitCode(exitCode);
  const retryAfterMs = retryDelayMs(message) ?? classified.retryAfterMs;
  let category: FailureCategory;
  if (status !== undefined) category = categoryForStatus(status);
  else if (exitCode !== null && EXIT_CATEGORIES[exitCode] !== undefined) category = EXIT_CATEGORIES[exitCode].category;
  else if (classified.category === 'unknown' && TRANSIENT_EMPTY_RESPONSE.test(message)) category = 'server_error';
  else category = classified.category;
  return { text: message, category, agentError: message, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) };
}

/** The failure of an attempt that exited non-zero without a `result` line. */
export function exitCodeFailure(exitCode: number): FailureFacts {
  const known = EXIT_CATEGORIES[exitCode];
  if (known !== undefined) return { text: `gemini stopped before running: ${known.what}`, category: known.category };
  const status = statusFromExitCode(exitCode);
  if (status !== undefined)
    return {
      text: `the agent exited with code ${exitCode} (HTTP ${status} truncated to 8 bits)`,
      category: categoryForStatus(status),
    };
  return { text: `the agent exited with code ${exitCode}`, category: 'process_crash' };
}
