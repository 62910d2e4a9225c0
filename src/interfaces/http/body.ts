import type { Context } from 'hono';
import type { z } from 'zod';
import { zodIssues } from '../../runtime/enqueue-request.ts';

export interface Issue {
  field: string;
  message: string;
}

/** A request the API refuses with a JSON error: `{error, issues?}`. */
export class HttpError extends Error {
  override readonly name = 'HttpError';
  readonly status: 400 | 401 | 403 | 404 | 413 | 415 | 503;
  readonly issues: Issue[] | undefined;
  constructor(status: HttpError['status'], message: string, issues?: Issue[]) {
    super(message);
    this.status = status;
    this.issues = issues;
  }
}

/**
 * The request's JSON body: an empty body is `undefined`; a body must be sent as
 * `application/json` (415 otherwise: a browser form of another site cannot
 * send one without a CORS preflight); malformed JSON is a 400.
 */
export async function readJson(c: Context): Promise<unknown> {
  const text = await c.req.text();
  if (text.trim() === '') return undefined;
  const type = (c.req.header('content-type') ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  if (type !== 'application/json' && !/^application\/[\w.+-]*\+json$/.test(type)) {
    throw new HttpError(415, 'the request body must be JSON sent with Content-Type: application/json');
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new HttpError(400, `malformed JSON body: ${(error as Error).message}`, [
      { field: '(body)', message: 'must be valid JSON' },
    ]);
  }
}

/** Validates `value` with `schema`: a 400 naming every bad field otherwise. */
export function validate<S extends z.ZodType>(schema: S, value: unknown): z.output<S> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new HttpError(400, 'invalid request', zodIssues(parsed.error));
  return parsed.data;
}
