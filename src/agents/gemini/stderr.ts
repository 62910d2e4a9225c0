import type { MessageOf } from '../../protocol/index.ts';

/**
 * gemini's stderr is noisy: startup warnings on every run, and a stack trace under every error.
 * Contract: pure, never throws.
 */
const NOISE = [
  /^Warning: 256-color support not detected/,
  /^Ripgrep is not available/,
  /^\[STARTUP\] /,
  /^YOLO mode is enabled/,
  /^\s+at .+/,
];

/** stderr without gemini's startup noise and stack frames; what is left is the tail that says what happened. */
export function meaningfulStderr(stderr: string): string {
  return stderr
    .split('\n')
    .filter((line) => !NOISE.some((pattern) => pattern.test(line)))
    .join('\n');
}

/**
 * gemini prints its own retries on stderr only (nothing on stdout), e.g.
 * `Attempt 1 failed with status 500. Retrying with backoff... _ApiError: …` or
 * `Attempt 2 failed: <message>. Retrying after 5230ms...`. With `general.maxAttempts: 1` there
 * are none; a project's `.gemini/settings.json` can still raise it (workspace settings win over
 * user settings), and then each retry it printed is surfaced, after the fact, as `agent.retry`.
 */
const RETRY_LINE = /^Attempt (\d+) failed(.*?)\. Retrying (?:with backoff|after (\d+)ms)\.\.\.(.*)$/;

export function retriesInStderr(stderr: string): Array<MessageOf<'agent.retry'>> {
  const out: Array<MessageOf<'agent.retry'>> = [];
  for (const line of stderr.split('\n')) {
    const match = RETRY_LINE.exec(line);
    if (match === null) continue;
    const attempt = Number(match[1]);
    const delayMs = match[3] === undefined ? undefined : Number(match[3]);
    out.push({
      type: 'agent.retry',
      content: {
        phase: 'start',
        ...(Number.isSafeInteger(attempt) ? { attempt } : {}),
        ...(delayMs === undefined || !Number.isFinite(delayMs) ? {} : { delayMs }),
        errorText: line.slice(0, 2000),
      },
    });
  }
  return out;
}
