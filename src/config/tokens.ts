import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { z } from 'zod';
import type { CallerIdentity } from './caller.ts';
import { TOKEN_DEFAULTS } from './defaults.ts';

export { callerIssues, type CallerIdentity } from './caller.ts';

/**
 * API token configuration: named tokens, each with a scope, stored as the SHA-256
 * of the token (so no plaintext token needs to sit in a config file).
 *
 * - `read`: every GET, the event stream, `/metrics`;
 * - `write`: read + create sessions, add prompts, cancel;
 * - `admin`: write + retry policy, deployment policy, deletion, queue controls.
 */
export const SCOPES = ['read', 'write', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];

/** A tenant's name: what a session records and a fleet limit's `tenant` matches. */
export const TENANT_PATTERN = /^[A-Za-z0-9_.@-]{1,100}$/;
export const TENANT_MESSAGE = 'must be 1-100 letters, digits or _.@-';
/** The range of a prompt's priority: the activation queue's MIN_PRIORITY…MAX_PRIORITY (src/runtime/queue.ts; test/config/tokens.test.ts keeps them equal). */
export const PRIORITY_RANGE = { min: -1000, max: 1000 } as const;

const priority = z
  .number({ error: `must be an integer from ${PRIORITY_RANGE.min} to ${PRIORITY_RANGE.max}` })
  .int(`must be an integer from ${PRIORITY_RANGE.min} to ${PRIORITY_RANGE.max}`)
  .min(PRIORITY_RANGE.min, `must be an integer from ${PRIORITY_RANGE.min} to ${PRIORITY_RANGE.max}`)
  .max(PRIORITY_RANGE.max, `must be an integer from ${PRIORITY_RANGE.min} to ${PRIORITY_RANGE.max}`);
const cap = (max: number) =>
  z
    .number({ error: `must be an integer from 1 to ${max}` })
    .int(`must be an integer from 1 to ${max}`)
    .min(1, `must be an integer from 1 to ${max}`)
    .max(max, `must be an integer from 1 to ${max}`);

export const TokenEntrySchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must be 1-64 letters, digits or _.-'),
  scope: z.enum(SCOPES, { error: `must be one of ${SCOPES.join(', ')}` }),
  sha256: z
    .string()
    .regex(
      /^[0-9a-fA-F]{64}$/,
      'must be the SHA-256 of the token as 64 hex digits (e.g. `printf %s TOKEN | sha256sum`)',
    )
    .transform((s) => s.toLowerCase()),
  /** The tenant of the sessions this token creates (default: the token's name). A request may not name another. */
  tenant: z.string().regex(TENANT_PATTERN, TENANT_MESSAGE).optional(),
  /** The highest priority a request with this token may ask for (default 0, the default priority). */
  maxPriority: priority.optional(),
  /** Sessions created with this token that exist at once, at most (default TOKEN_DEFAULTS.maxSessions). */
  maxSessions: cap(10_000_000).optional(),
  /** Live event streams opened with this token (its cookie and tickets too) per server, at most (default TOKEN_DEFAULTS.maxStreams). */
  maxStreams: cap(100_000).optional(),
});
export type TokenEntry = z.output<typeof TokenEntrySchema>;

/** A token's identity and caps with the defaults filled in (documented in docs/security.md). */
export function tokenLimits(
  entry: Pick<TokenEntry, 'name' | 'tenant' | 'maxPriority' | 'maxSessions' | 'maxStreams'>,
): CallerIdentity & { maxSessions: number; maxStreams: number } {
  return {
    tenant: entry.tenant ?? entry.name,
    maxPriority: entry.maxPriority ?? TOKEN_DEFAULTS.maxPriority,
    maxSessions: entry.maxSessions ?? TOKEN_DEFAULTS.maxSessions,
    maxStreams: entry.maxStreams ?? TOKEN_DEFAULTS.maxStreams,
  };
}

/** The local caller (the CLI, `sessiond acp`, the HTTP API with no token configured, SESSIOND_API_TOKEN): config `caller`. */
export const CallerSchema = z
  .strictObject({
    tenant: z.string().regex(TENANT_PATTERN, TENANT_MESSAGE).default(TOKEN_DEFAULTS.localTenant),
    maxPriority: z
      .preprocess((v) => (typeof v === 'string' && /^-?\d+$/.test(v.trim()) ? Number(v) : v), priority)
      .default(TOKEN_DEFAULTS.localMaxPriority),
  })
  .prefault({});

export const TokenListSchema = z.array(TokenEntrySchema).superRefine((list, ctx) => {
  const seen = new Set<string>();
  list.forEach((entry, i) => {
    if (seen.has(entry.name))
      ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `duplicate token name "${entry.name}"` });
    seen.add(entry.name);
  });
  const hashes = new Set<string>();
  list.forEach((entry, i) => {
    if (hashes.has(entry.sha256))
      ctx.addIssue({ code: 'custom', path: [i, 'sha256'], message: 'the same token is listed twice' });
    hashes.add(entry.sha256);
  });
});

/**
 * The tokens file (`http.tokensFile`, env SESSIOND_API_TOKENS_FILE): a JSON array of
 * `{name, scope, sha256}`, each optionally with `tenant`, `maxPriority`, `maxSessions`, `maxStreams`. Returns the entries or a message naming the field; never a token.
 */
export function readTokensFile(file: string): { ok: true; tokens: TokenEntry[] } | { ok: false; message: string } {
  let text: string;
  try {
    text = readFileSync(resolve(file), 'utf8');
  } catch (error) {
    return { ok: false, message: `cannot read ${file}: ${(error as Error).message}` };
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    // Said to the caller as the result's message.
    return { ok: false, message: `${file} is not valid JSON` };
  }
  const parsed = TokenListSchema.safeParse(raw);
  if (!parsed.success)
    return { ok: false, message: parsed.error.issues.map((i) => `[${i.path.join('.')}]: ${i.message}`).join('; ') };
  return { ok: true, tokens: parsed.data };
}
