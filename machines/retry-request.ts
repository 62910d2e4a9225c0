import type { AttemptRecord } from './types.ts';

/**
 * What a retry sends to the agent, so that the conversation never holds the
 * user's prompt twice nor a half answer that the next attempt contradicts:
 * - the failed attempt had recorded the prompt in the agent's session (the
 *   agent answered or called the model): resume that session with this short
 *   continuation; the agent's session keeps the prompt once, and the model sees
 *   whatever partial answer the agent kept;
 * - it had not (the agent died or could not start before using the prompt):
 *   send the prompt again, in the session of the previous turns if any.
 */
export const CONTINUATION_PROMPT =
  'Your previous answer to my last message was cut off by an error. Continue from where it stopped; do not repeat what you already said.';

export function retryRequest(prompt: string, failedAttempt: AttemptRecord | null, resumableSession: string | null): { text: string; continuation: boolean } {
  if (failedAttempt?.promptRecorded === true && resumableSession !== null) return { text: CONTINUATION_PROMPT, continuation: true };
  return { text: prompt, continuation: false };
}
