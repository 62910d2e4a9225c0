import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { z } from 'zod';

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

export const TokenEntrySchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must be 1-64 letters, digits or _.-'),
  scope: z.enum(SCOPES, { error: `must be one of ${SCOPES.join(', ')}` }),
  sha256: z
    .string()
    .regex(/^[0-9a-fA-F]{64}$/, 'must be the SHA-256 of the token as 64 hex digits (e.g. `printf %s TOKEN | sha256sum`)')
    .transform((s) => s.toLowerCase()),
});
export type TokenEntry = z.output<typeof TokenEntrySchema>;

export const TokenListSchema = z.array(TokenEntrySchema).superRefine((list, ctx) => {
  const seen = new Set<string>();
  list.forEach((entry, i) => {
    if (seen.has(entry.name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `duplicate token name "${entry.name}"` });
    seen.add(entry.name);
  });
  const hashes = new Set<string>();
  list.forEach((entry, i) => {
    if (hashes.has(entry.sha256)) ctx.addIssue({ code: 'custom', path: [i, 'sha256'], message: 'the same token is listed twice' });
    hashes.add(entry.sha256);
  });
});

/**
 * The tokens file (`http.tokensFile`, env SESSIOND_API_TOKENS_FILE): a JSON array of
 * `{name, scope, sha256}`. Returns the entries or a message naming the field; never a token.
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
    return { ok: false, message: `${file} is not valid JSON` };
  }
  const parsed = TokenListSchema.safeParse(raw);
  if (!parsed.success) return { ok: false, message: parsed.error.issues.map((i) => `[${i.path.join('.')}]: ${i.message}`).join('; ') };
  return { ok: true, tokens: parsed.data };
}
