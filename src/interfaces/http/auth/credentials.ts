import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Config } from '../../../config/config.ts';
import { tokenLimits, type CallerIdentity, type Scope, type TokenEntry } from '../../../config/tokens.ts';

/** Who a request is: the token's name (never the token), the scope it grants, its tenant and highest priority. */
export interface Principal {
  name: string | null;
  scope: Scope;
  /** The tenant its sessions are recorded under (a request may not name another). */
  tenant: string;
  /** The highest priority its requests may ask for. */
  maxPriority: number;
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

/** One configured token as the guard holds it: no plaintext, the hash only to compare and to derive a fingerprint from. */
export interface HeldToken extends CallerIdentity {
  name: string;
  scope: Scope;
  hash: Buffer;
  maxSessions: number;
  maxStreams: number;
}

/**
 * The configured tokens. `verify` hashes what it is given and compares it with
 * every entry's SHA-256 in constant time (no early exit), so neither the match
 * nor its position leaks through timing. Holds no plaintext token.
 */
export class TokenSet {
  readonly #entries: HeldToken[];

  constructor(entries: ReadonlyArray<Pick<TokenEntry, 'name' | 'scope' | 'sha256'> & Partial<TokenEntry>>) {
    this.#entries = entries.map((e) => ({
      name: e.name,
      scope: e.scope,
      hash: Buffer.from(e.sha256, 'hex'),
      ...tokenLimits(e),
    }));
  }

  /** SESSIOND_API_TOKEN acts as the local caller (`caller`: its tenant and highest priority). */
  static fromConfig(http: Config['http'], caller: CallerIdentity): TokenSet {
    const entries: Array<Pick<TokenEntry, 'name' | 'scope' | 'sha256'> & Partial<TokenEntry>> = [...http.tokens];
    if (http.token !== undefined) {
      entries.push({
        name: 'SESSIOND_API_TOKEN',
        scope: http.tokenScope,
        sha256: sha256(http.token).toString('hex'),
        tenant: caller.tenant,
        maxPriority: caller.maxPriority,
      });
    }
    return new TokenSet(entries);
  }

  get size(): number {
    return this.#entries.length;
  }

  verify(token: string): HeldToken | null {
    const given = sha256(token);
    let found: HeldToken | null = null;
    for (const entry of this.#entries) {
      if (timingSafeEqual(given, entry.hash)) found = entry;
    }
    return found;
  }

  /** The token of this name as configured now (null once it is no longer configured). */
  entry(name: string): HeldToken | null {
    return this.#entries.find((e) => e.name === name) ?? null;
  }
}

/**
 * What a signed value carries: a purpose (so a ticket is never a login and back), the token's name,
 * scope, fingerprint and expiry.
 */
export interface SignedClaims {
  p: 'stream' | 'login';
  n: string | null;
  sc: Scope;
  /** The fingerprint of the token it was issued from (Signer.fingerprint): rotated or removed, it no longer matches. */
  f?: string;
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
    this.#key =
      secret === undefined ? randomBytes(32) : createHash('sha256').update(`sessiond-signing:${secret}`).digest();
  }

  /**
   * A token's fingerprint: HMAC of its SHA-256 under this signer's key, 128 bits. It tells whether
   * the token behind a credential is still the one configured under its name, and says nothing of
   * the token or its hash to whoever reads the (unencrypted) cookie.
   */
  fingerprint(hash: Buffer): string {
    return createHmac('sha256', this.#key)
      .update('sessiond-token-fingerprint:')
      .update(hash)
      .digest()
      .subarray(0, 16)
      .toString('base64url');
  }

  sign(claims: SignedClaims): string {
    const body = Buffer.from(JSON.stringify(claims), 'utf8').toString('base64url');
    return `${body}.${this.#mac(body)}`;
  }

  /** The claims when the signature is right, the purpose matches and it has not expired; else why not. */
  verify(
    value: string,
    purpose: SignedClaims['p'],
    now = Date.now(),
  ): { ok: true; claims: SignedClaims } | { ok: false; reason: 'invalid' | 'expired' } {
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
      // A body that is not JSON is an invalid credential, said to the caller as the reason.
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
