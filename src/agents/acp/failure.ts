import type { FailureCategory } from '../../protocol/index.ts';
import { classifyErrorText } from '../shared/classify-error-text.ts';
import type { FailureFacts } from '../shared/terminal.ts';

/**
 * What an ACP agent's error answer means, decided once here. ACP reports a failed request as a
 * JSON-RPC error `{code, message, data}`:
 * - `-32000` is ACP's "authentication required" → `auth`;
 * - `-32600` invalid request, `-32601` method not found, `-32602` invalid params → `bad_request`
 *   (sessiond asked for something this agent does not do);
 * - `-32002` resource not found (e.g. `session/load` of a session the agent does not have) →
 *   `bad_request`;
 * - anything else (`-32603` internal error, agent-specific codes): the message and data are
 *   read as the agent's relay of its model API's error (HTTP status, rate limit, network…), and
 *   `unknown` when they say nothing recognisable.
 * Contract: pure, never throws.
 */
const CODE_CATEGORIES: Record<number, FailureCategory> = {
  [-32000]: 'auth',
  [-32600]: 'bad_request',
  [-32601]: 'bad_request',
  [-32602]: 'bad_request',
  [-32002]: 'bad_request',
};

export function rpcFailure(code: number | undefined, message: string, data: unknown, during = 'session/prompt'): FailureFacts {
  const detail = data === undefined || data === null ? '' : typeof data === 'string' ? data : safeJson(data);
  const agentError = detail === '' ? message : `${message} ${detail}`;
  const classified = classifyErrorText(agentError);
  const category = (code === undefined ? undefined : CODE_CATEGORIES[code]) ?? classified.category;
  return {
    text: `the agent answered ${during} with error ${code ?? '?'}: ${agentError}`,
    category,
    agentError,
    ...(classified.retryAfterMs === undefined ? {} : { retryAfterMs: classified.retryAfterMs }),
  };
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? '';
  } catch {
    return String(value);
  }
}
