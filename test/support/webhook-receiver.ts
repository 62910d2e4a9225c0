import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';

/** One request a receiver got: the Standard Webhooks headers, the body, and the status it answered. */
export interface ReceivedWebhook {
  id: string;
  timestamp: string;
  signature: string;
  body: string;
  status: number;
}

/**
 * An HTTP receiver of webhooks on 127.0.0.1:`port`, answering `status` (after `answerDelayMs`, so that overlapping
 * deliveries of one webhook-id would show in `maxInFlight`).
 */
export class WebhookReceiver {
  readonly requests: ReceivedWebhook[] = [];
  status = 200;
  /** Requests of one webhook-id in flight at once, at most (1: never two deliverers at a time). */
  maxInFlight = 0;
  readonly #inFlight = new Map<string, number>();
  #server: Server | null = null;
  constructor(
    readonly port: number,
    readonly answerDelayMs = 0,
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  async listen(): Promise<void> {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      const id = String(req.headers['webhook-id']);
      const n = (this.#inFlight.get(id) ?? 0) + 1;
      this.#inFlight.set(id, n);
      this.maxInFlight = Math.max(this.maxInFlight, n);
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const status = this.status;
        this.requests.push({
          id,
          timestamp: String(req.headers['webhook-timestamp']),
          signature: String(req.headers['webhook-signature']),
          body: Buffer.concat(chunks).toString('utf8'),
          status,
        });
        setTimeout(() => {
          this.#inFlight.set(id, (this.#inFlight.get(id) ?? 1) - 1);
          res.writeHead(status).end();
        }, this.answerDelayMs);
      });
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.#server = server;
  }

  async close(): Promise<void> {
    const server = this.#server;
    this.#server = null;
    if (server === null) return;
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }

  /** The events answered 2xx, each once (deduplicated by webhook-id, as a receiver keeps them), in arrival order. */
  delivered(): Map<string, { type: string; sessionId: string; turn: number; [k: string]: unknown }> {
    const out = new Map<string, { type: string; sessionId: string; turn: number }>();
    for (const r of this.requests)
      if (r.status >= 200 && r.status < 300 && !out.has(r.id))
        out.set(r.id, JSON.parse(r.body) as { type: string; sessionId: string; turn: number });
    return out;
  }

  /** The same, as a list. */
  events(): Array<{ type: string; sessionId: string; turn: number; [k: string]: unknown }> {
    return [...this.delivered().values()];
  }
}

/**
 * The specification's check: how many `v1,` signatures the header has, each a base64 HMAC-SHA256 of
 * "id.timestamp.body" under one of `secrets` (the bytes after `whsec_`); 0 when any one is not.
 */
export function validSignatures(
  r: Pick<ReceivedWebhook, 'id' | 'timestamp' | 'signature' | 'body'>,
  secrets: readonly string[],
): number {
  let valid = 0;
  for (const part of r.signature.split(' ')) {
    const [version, sig] = part.split(',');
    if (version !== 'v1' || sig === undefined) return 0;
    const given = Buffer.from(sig, 'base64');
    const ok = secrets.some((secret) => {
      const expected = createHmac('sha256', Buffer.from(secret.slice('whsec_'.length), 'base64'))
        .update(`${r.id}.${r.timestamp}.${r.body}`)
        .digest();
      return given.length === expected.length && timingSafeEqual(given, expected);
    });
    if (!ok) return 0;
    valid += 1;
  }
  return valid;
}
