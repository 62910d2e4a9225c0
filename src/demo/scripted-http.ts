/**
 * The protocol-independent half of a scripted fake model server: the local HTTP listener, the step
 * kinds every fake knows (an HTTP error, a hang, a stream), choosing the step of the n-th request from
 * a script, and streaming SSE events with a delay and an ending (`done`, `drop`, `hang`).
 *
 * The OpenAI-compatible demo server (./model-server.ts) and the test fakes of the Anthropic, Gemini and
 * Responses APIs (test/support) build their protocol's event shapes, request parsing and error bodies
 * on top of it. Plain TypeScript + node:http only, no test-framework imports.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

// ---------------------------------------------------------------------------------------------
// Steps and scripts
// ---------------------------------------------------------------------------------------------

export interface HttpErrorStep {
  status: number;
  /** Sent as it is when a string, else JSON-encoded. Default: the protocol's error body for the status. */
  body?: unknown;
  /** Extra response headers, e.g. `retry-after`. */
  headers?: Record<string, string>;
}

export interface HangStep {
  /** Never send response headers; the request stays open until the client or the server closes it. */
  hang: true;
}

/**
 * How a stream ends. `done`: every event, then the response ends. `drop`: after the first events the
 * socket is destroyed. `hang`: after the first events nothing more is sent (until the client goes away).
 */
export type StreamEnd = 'done' | 'drop' | 'hang';

/** Pacing and ending of a stream step (how many events `drop` / `hang` send first is the protocol's option). */
export interface StreamPacing {
  /** Delay between SSE events in ms. Default: the server's. */
  chunkDelayMs?: number;
  /** Default `done`. */
  then?: StreamEnd;
}

/** One step for every request, an array (request n gets step n, the last one repeats), or a function of the request. */
export type ScriptOf<Step, Ctx> = Step | Step[] | ((ctx: Ctx) => Step);

/** True for an HTTP error step (`{ status }`). */
export function isHttpErrorStep<S extends object>(step: S): step is Extract<S, HttpErrorStep> {
  return typeof (step as Partial<HttpErrorStep>).status === 'number';
}

/** True for a hang step (`{ hang: true }`). */
export function isHangStep<S extends object>(step: S): step is Extract<S, HangStep> {
  return (step as Partial<HangStep>).hang === true;
}

/** The step of a script for the request `ctx.index` (0-based among the requests of that script). */
export function pickStep<Step extends object, Ctx extends { index: number }>(
  script: ScriptOf<Step, Ctx>,
  ctx: Ctx,
  name: string,
): Step {
  if (typeof script === 'function') return script(ctx);
  if (Array.isArray(script)) {
    const step = script[Math.min(ctx.index, script.length - 1)];
    if (step === undefined) throw new Error(`empty script for ${name}`);
    return step;
  }
  return script;
}

// ---------------------------------------------------------------------------------------------
// Text helpers
// ---------------------------------------------------------------------------------------------

/** "Hello from the fake LLM." -> ["Hello", " from", " the", " fake", " LLM."] */
function splitWords(text: string): string[] {
  const parts = text.match(/\s*\S+\s*$|\s*\S+/g);
  return parts && parts.length > 0 ? parts : [text];
}

/** Chunks of a step field: a string is split at word boundaries, an array is taken as it is, none is []. */
export function words(v: string | string[] | undefined): string[] {
  if (v === undefined) return [];
  return typeof v === 'string' ? splitWords(v) : v;
}

/** `s` in at most `n` fragments of equal length (the last one shorter). */
export function splitInto(s: string, n: number): string[] {
  if (n <= 1 || s.length <= 1) return [s];
  const size = Math.ceil(s.length / n);
  const out: string[] = [];
  for (let i = 0; i < s.length; i += size) out.push(s.slice(i, i + size));
  return out;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------------------------------

/** The whole request body as UTF-8 text. */
export async function readBody(req: IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  for await (const chunk of req) parts.push(chunk as Buffer);
  return Buffer.concat(parts).toString('utf8');
}

/**
 * Answers an HTTP error step with `payload`: as text/plain when it is a string, else JSON-encoded as
 * `jsonType`, with the step's extra headers. Nothing is sent once the response is destroyed.
 */
export function writeHttpError(
  res: ServerResponse,
  step: HttpErrorStep,
  payload: unknown,
  jsonType = 'application/json',
): void {
  if (res.destroyed) return;
  const text = typeof payload === 'string' ? payload : JSON.stringify(payload);
  res.writeHead(step.status, {
    'content-type': typeof payload === 'string' ? 'text/plain' : jsonType,
    ...(step.headers ?? {}),
  });
  res.end(text);
}

export interface StreamEventsOptions {
  /** Headers of the 200 response (flushed before the first event). */
  headers: Record<string, string>;
  /** Delay between events in ms; 0 sends them back to back. */
  delayMs: number;
  then: StreamEnd;
}

/**
 * Sends a 200 with `headers`, then each of `events` (already SSE-encoded) with `delayMs` between them,
 * stopping as soon as the client goes away; then ends the response (`done`), destroys the socket once
 * the events had time to arrive (`drop`), or leaves the response open (`hang`).
 */
export async function streamEvents(
  res: ServerResponse,
  events: readonly string[],
  options: StreamEventsOptions,
): Promise<void> {
  let gone = false;
  res.on('close', () => {
    gone = true;
  });
  res.writeHead(200, options.headers);
  res.flushHeaders();
  const delay = options.delayMs;
  for (const [i, event] of events.entries()) {
    if (i > 0 && delay > 0) await sleep(delay);
    if (gone) return;
    res.write(event);
  }
  if (options.then === 'done') {
    res.end();
  } else if (options.then === 'drop') {
    await sleep(Math.max(delay, 10)); // let the written events reach the client first
    res.socket?.destroy();
    res.destroy();
  }
  // 'hang': leave the response open until the client goes away or the server closes
}

export interface LocalHttpServer {
  port: number;
  /** Closes the listener and destroys every open connection (hanging ones included). */
  close(): Promise<void>;
}

/**
 * Serves `handle` on 127.0.0.1 (`port` 0: a free one). When `handle` throws, `onBug` answers if no
 * headers were sent yet, else the response is destroyed.
 */
export async function listenLocal(
  handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>,
  onBug: (res: ServerResponse, err: unknown) => void,
  port = 0,
): Promise<LocalHttpServer> {
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    void handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) onBug(res, err);
      else res.destroy();
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
        server.closeAllConnections();
      }),
  };
}
