import type { FailureCategory } from '../../protocol/index.ts';
import { categoryForStatus, classifyErrorText } from '../shared/classify-error-text.ts';
import type { FailureFacts } from '../shared/terminal.ts';

/**
 * What an ACP agent's error answer means, decided once here. ACP reports a failed request as a
 * JSON-RPC error `{code, message, data}`:
 * - `-32000` is ACP's "authentication required" → `auth`;
 * - `-32600` invalid request, `-32601` method not found, `-32602` invalid params → `bad_request`
 *   (sessiond asked for something this agent does not do);
 * - `-32002` resource not found (e.g. `session/load` of a session the agent does not have) →
 *   `bad_request`;
 * - a code from 400 to 599 is the model API's HTTP status, relayed (gemini 0.61 answers a 401
 *   from its API with error code 401 and Google's error JSON as the message);
 * - anything else (`-32603` internal error, agent-specific codes): the message and data are
 *   read as the agent's relay of its model API's error (an embedded `"code": 500`, an HTTP status,
 *   rate limit, network…), and `unknown` when they say nothing recognisable.
 * Contract: pure, never throws.
 */
const CODE_CATEGORIES: Record<number, FailureCategory> = {
  [-32000]: 'auth',
  [-32600]: 'bad_request',
  [-32601]: 'bad_request',
  [-32602]: 'bad_request',
  [-32002]: 'bad_request',
};

export function rpcFailure(
  code: number | undefined,
  message: string,
  data: unknown,
  during = 'session/prompt',
): FailureFacts {
  const detail = data === undefined || data === null ? '' : typeof data === 'string' ? data : safeJson(data);
  const agentError = detail === '' ? message : `${message} ${detail}`;
  // -32603's standard message says nothing about the cause (and reads as "internal error" = 5xx): only its data does.
  const classified = classifyErrorText(
    code === -32603 && /^internal error$/i.test(message.trim()) ? detail : agentError,
  );
  const status = code !== undefined && code >= 400 && code <= 599 ? code : embeddedStatus(agentError);
  const category =
    (code === undefined ? undefined : CODE_CATEGORIES[code]) ??
    (status === undefined ? classified.category : categoryForStatus(status));
  return {
    text: `the agent answered ${during} with error ${code ?? '?'}: ${agentError}`,
    category,
    agentError,
    ...(classified.retryAfterMs === undefined ? {} : { retryAfterMs: classified.retryAfterMs }),
  };
}

/** `"code":500` in an error JSON the agent embeds in its message. */
function embeddedStatus(text: string): number | undefined {
  const match = /"code"\s*:\s*(\d{3})\b/.exec(text);
  const status = match?.[1] === undefined ? undefined : Number(match[1]);
  return status !== undefined && status >= 400 && status <= 599 ? status : undefined;
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? '';
  } catch {
    // A value JSON cannot write (a cycle, a BigInt) is still shown, as text.
    return String(value);
  }
}
