import type { AttemptRecord } from './types.ts';

/**
 * What a retry sends to the agent, so that the conversation never holds the
 * user's prompt twice nor a half answer that the next attempt contradicts:
 * - the failed attempt had recorded the prompt in the agent's session (its
 *   terminal message says `promptRecorded`): resume that session with this
 *   short continuation. The session keeps the prompt once; pi leaves a failed
 *   (errored or aborted) assistant message out of what it sends to the model,
 *   so no half answer is there to contradict, while completed tool steps stay;
 * - it had not (the agent died or could not start before using the prompt):
 *   send the prompt again, in the session of the previous turns if any.
 */
export const CONTINUATION_PROMPT =
  'Your reply to my last request was interrupted by an error before it finished. Please carry on with that request.';

export function retryRequest(
  prompt: string,
  failedAttempt: Pick<AttemptRecord, 'promptRecorded'> | null,
  resumableSession: string | null,
): { text: string; continuation: boolean } {
  if (failedAttempt?.promptRecorded === true && resumableSession !== null)
    return { text: CONTINUATION_PROMPT, continuation: true };
  return { text: prompt, continuation: false };
}
