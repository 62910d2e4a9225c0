import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Config } from '../../../config/config.ts';
import type { Scope, TokenEntry } from '../../../config/tokens.ts';

/** Who a request is: the token's name (never the token) and the scope it grants. */
export interface Principal {
  name: string | null;
  scope: Scope;
  /** How it was shown: a bearer token, the dashboard's login cookie, a stream ticket, or nothing (no token configured, loopback). */
  via: 'bearer' | 'cookie' | 'ticket' | 'open';
  /** When the credential stops working (cookie, ticket), ms since the epoch. */
  expiresAt?: number;
}

const RANK: Record<Scope, number> = { read: 1, write: 2, admin: 3 };

/** `have` grants what `need` asks for (admin ⊃ write ⊃ read). */
export function scopeAllows(have: Scope, need: Scope): boolean {
  return RANK[have] >= RANK[need];
}

export function lowerScope(a: Scope, b: Scope): Scope {
  return RANK[a] <= RANK[b] ? a : b;
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/**
 * The configured tokens. `verify` hashes what it is given and compares it with
 * every entry's SHA-256 in constant time (no early exit), so neither the match
 * nor its position leaks through timing. Holds no plaintext token.
 */
export class TokenSet {
  readonly #entries: Array<{ name: string; scope: Scope; hash: Buffer }>;

  constructor(entries: ReadonlyArray<Pick<TokenEntry, 'name' | 'scope' | 'sha256'>>) {
    this.#entries = entries.map((e) => ({ name: e.name, scope: e.scope, hash: Buffer.from(e.sha256, 'hex') }));
  }

  static fromConfig(http: Config['http']): TokenSet {
    const entries: Array<Pick<TokenEntry, 'name' | 'scope' | 'sha256'>> = [...http.tokens];
    if (http.token !== undefined) entries.push({ name: 'SESSIOND_API_TOKEN', scope: http.tokenScope, sha256: sha256(http.token).toString('hex') });
    return new TokenSet(entries);
  }

  get size(): number {
    return this.#entries.length;
  }

  verify(token: string): { name: string; scope: Scope } | null {
    const given = sha256(token);
    let found: { name: string; scope: Scope } | null = null;
    for (const entry of this.#entries) {
      if (timingSafeEqual(given, entry.hash)) found = { name: entry.name, scope: entry.scope };
    }
    return found;
  }

  /** The scope a token of this name has now (null once it is no longer configured). */
  scopeOf(name: string): Scope | null {
    return this.#entries.find((e) => e.name === name)?.scope ?? null;
  }
}

/** What a signed value carries: a purpose (so a ticket is never a login and back), the token's name, scope and expiry. */
export interface SignedClaims {
  p: 'stream' | 'login';
  n: string | null;
  sc: Scope;
  exp: number;
  /** A stream ticket's session id. */
  s?: string;
}

/**
 * HMAC-SHA256 signatures for stream tickets and login cookies:
 * `base64url(JSON claims).base64url(HMAC)`. The key is `http.secret` (share it
 * between servers behind one load balancer), else random per process (a restart
 * signs everyone out).
 */
export class Signer {
  readonly #key: Buffer;

  constructor(secret: string | undefined) {
    this.#key = secret === undefined ? randomBytes(32) : createHash('sha256').update(`sessiond-signing:${secret}`).digest();
  }

  sign(claims: SignedClaims): string {
    const body = Buffer.from(JSON.stringify(claims), 'utf8').toString('base64url');
    return `${body}.${this.#mac(body)}`;
  }

  /** The claims when the signature is right, the purpose matches and it has not expired; else why not. */
  verify(value: string, purpose: SignedClaims['p'], now = Date.now()): { ok: true; claims: SignedClaims } | { ok: false; reason: 'invalid' | 'expired' } {
    const dot = value.indexOf('.');
    if (dot <= 0 || value.length > 2048) return { ok: false, reason: 'invalid' };
    const body = value.slice(0, dot);
    const given = Buffer.from(value.slice(dot + 1), 'base64url');
    const expected = Buffer.from(this.#mac(body), 'base64url');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { ok: false, reason: 'invalid' };
    let claims: SignedClaims;
    try {
      claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as SignedClaims;
    } catch {
      return { ok: false, reason: 'invalid' };
    }
    if (claims.p !== purpose || typeof claims.exp !== 'number') return { ok: false, reason: 'invalid' };
    if (claims.exp <= now) return { ok: false, reason: 'expired' };
    return { ok: true, claims };
  }

  #mac(body: string): string {
    return createHmac('sha256', this.#key).update(body).digest('base64url');
  }
}
