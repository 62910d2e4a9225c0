/**
 * A fake OpenAI-compatible `POST /v1/chat/completions` server that streams SSE the way the
 * OpenAI SDK (and therefore pi's `openai-completions` provider) expects.
 *
 * Behaviour is chosen by the `model` id of each request. Built-in model ids are listed in
 * `BUILTIN_MODEL_IDS`; any model id can be (re)scripted with `setScript(model, script)`.
 *
 * A script is either
 *   - an array of steps: request n (per model id) gets step n, the last step repeats, or
 *   - a function `(ctx) => step` that decides from the request (e.g. "is there a tool result yet?").
 *
 * Steps (see `ScriptStep`):
 *   - stream:  `{ text: 'Hello there' }`, `{ reasoning: [...], text: [...] }`,
 *              `{ toolCalls: [{ name: 'bash', arguments: { command: 'echo hi' } }] }`,
 *              optionally ending with `then: 'drop'` (socket destroyed) or `then: 'hang'` (silence).
 *   - error:   `{ status: 500 }`, `{ status: 429, headers: { 'retry-after': '7' } }`, custom `body`.
 *   - hang:    `{ hang: true }` (never sends headers).
 *
 * Plain TypeScript + node:http only, no test-framework imports (it may be reused by a demo mode).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  builtinScripts,
  defaultErrorBody,
  type ChatCompletionRequestBody,
  type HttpErrorStep,
  type RecordedRequest,
  type Script,
  type ScriptContext,
  type ScriptStep,
  type StreamStep,
} from './model-scripts.ts';
import {
  isHangStep,
  isHttpErrorStep,
  listenLocal,
  pickStep,
  readBody,
  sleep,
  splitInto,
  streamEvents,
  words,
  writeHttpError,
} from './scripted-http.ts';

// ---------------------------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------------------------

export interface FakeModelServerOptions {
  /** Port to bind on 127.0.0.1. Default 0 (a free port). */
  port?: number;
  /** Extra/overriding scripts by model id (applied on top of the built-ins). */
  scripts?: Record<string, Script>;
  /** Script used for model ids that have no script. Default: a 404 error. */
  fallback?: Script;
  /** Default chunk delay (ms) for stream steps that do not set chunkDelayMs. Default 30. */
  chunkDelayMs?: number;
  /** Called for every recorded request (after it is recorded, before it is answered). */
  onRequest?: (req: RecordedRequest) => void;
}

export interface FakeModelServer {
  /** Base URL for the OpenAI SDK, e.g. `http://127.0.0.1:41691/v1`. */
  url: string;
  port: number;
  /** Every `POST /v1/chat/completions`, in arrival order. */
  requests: RecordedRequest[];
  requestsFor(model: string): RecordedRequest[];
  /** Replace the script of a model id. Resets its queue position. */
  setScript(model: string, script: Script): void;
  /** Chat-completion requests being answered now (received, response not yet ended), of one model or all. */
  inFlight(model?: string): number;
  /** The most requests in flight at once since the start (or `reset`), of one model or all. */
  peakInFlight(model?: string): number;
  /** Forget recorded requests, reset every queue position and the response-id counter. */
  reset(): void;
  /** Closes the listener and destroys every open connection (hanging ones included). */
  close(): Promise<void>;
}

interface ModelState {
  script: Script;
  count: number;
}

export async function startFakeModelServer(options: FakeModelServerOptions = {}): Promise<FakeModelServer> {
  const defaultDelay = options.chunkDelayMs ?? 30;
  const models = new Map<string, ModelState>();
  for (const [id, script] of Object.entries({ ...builtinScripts(), ...(options.scripts ?? {}) })) {
    models.set(id, { script, count: 0 });
  }
  const requests: RecordedRequest[] = [];
  const flying = new Map<string, number>();
  const peaks = new Map<string, number>();
  const track = (model: string, delta: number): void => {
    for (const key of [model, '\u0000all']) {
      const now = (flying.get(key) ?? 0) + delta;
      flying.set(key, now);
      if (now > (peaks.get(key) ?? 0)) peaks.set(key, now);
    }
  };
  let created = Math.floor(Date.now() / 1000);
  let responseCounter = 0;

  const stepFor = (model: string, ctx: ScriptContext): ScriptStep => {
    const state = models.get(model);
    const script: Script = state?.script ??
      options.fallback ?? {
        status: 404,
        body: {
          error: { message: `fake model not found: ${model}`, type: 'not_found_error', code: 'model_not_found' },
        },
      };
    return pickStep(script, ctx, `model ${model}`);
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '').split('?')[0] ?? '';
    if (req.method === 'GET' && /\/models$/.test(path)) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          object: 'list',
          data: [...models.keys()].map((id) => ({ id, object: 'model', owned_by: 'fake' })),
        }),
      );
      return;
    }
    if (req.method !== 'POST' || !/\/chat\/completions$/.test(path)) {
      writeError(res, {
        status: 404,
        body: { error: { message: `fake: no route ${req.method} ${path}`, type: 'not_found_error' } },
      });
      return;
    }
    const raw = await readBody(req);
    let body: ChatCompletionRequestBody;
    try {
      body = JSON.parse(raw) as ChatCompletionRequestBody;
    } catch {
      // The client is told: a 400 naming the bad body.
      writeError(res, {
        status: 400,
        body: { error: { message: 'fake: invalid JSON body', type: 'invalid_request_error' } },
      });
      return;
    }
    const model = typeof body.model === 'string' ? body.model : '';
    const state = models.get(model);
    const modelIndex = state ? state.count++ : requests.filter((r) => r.model === model).length;
    const request: RecordedRequest = {
      index: requests.length,
      modelIndex,
      model,
      body,
      headers: req.headers,
      at: Date.now(),
    };
    requests.push(request);
    track(model, 1);
    let done = false;
    const landed = (): void => {
      if (done) return;
      done = true;
      track(model, -1);
    };
    res.once('finish', landed);
    res.once('close', landed);
    options.onRequest?.(request);
    const step = stepFor(model, { request, body, index: modelIndex });

    if (isHangStep(step)) return; // never answer; close() destroys the socket
    if (isHttpErrorStep(step)) {
      if (step.delayMs) await sleep(step.delayMs);
      writeError(res, step);
      return;
    }
    await writeStream(res, model, step, body);
  }

  function writeError(res: ServerResponse, step: HttpErrorStep): void {
    writeHttpError(res, step, step.body === undefined ? defaultErrorBody(step.status) : step.body);
  }

  async function writeStream(
    res: ServerResponse,
    model: string,
    step: StreamStep,
    body: ChatCompletionRequestBody,
  ): Promise<void> {
    let gone = false;
    res.on('close', () => {
      gone = true;
    });
    if (step.headersDelayMs) await sleep(step.headersDelayMs);
    if (gone) return;
    const id = `chatcmpl-fake-${++responseCounter}`;
    created = Math.max(created, Math.floor(Date.now() / 1000));
    const chunk = (delta: Record<string, unknown>, finishReason: string | null = null): string =>
      `data: ${JSON.stringify({
        id,
        object: 'chat.completion.chunk',
        created,
        model,
        choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
      })}\n\n`;

    const content: string[] = [];
    let first = true;
    const withRole = (delta: Record<string, unknown>): Record<string, unknown> => {
      if (!first) return delta;
      first = false;
      return { role: 'assistant', ...delta };
    };
    for (const r of words(step.reasoning)) content.push(chunk(withRole({ reasoning_content: r })));
    for (const t of words(step.text)) content.push(chunk(withRole({ content: t })));
    const toolCalls = step.toolCalls ?? [];
    const turn = (body.messages ?? []).filter((m) => m.role === 'assistant').length + 1;
    toolCalls.forEach((tc, i) => {
      const callId = tc.id ?? `call_fake_${turn}_${i}`;
      const args = typeof tc.arguments === 'string' ? tc.arguments : JSON.stringify(tc.arguments);
      content.push(
        chunk(
          withRole({
            tool_calls: [{ index: i, id: callId, type: 'function', function: { name: tc.name, arguments: '' } }],
          }),
        ),
      );
      for (const frag of splitInto(args, tc.fragments ?? 3)) {
        content.push(chunk({ tool_calls: [{ index: i, function: { arguments: frag } }] }));
      }
    });
    if (content.length === 0) content.push(chunk(withRole({ content: '' })));

    const then = step.then ?? 'done';
    const tail: string[] = [];
    if (then === 'done') {
      tail.push(chunk({}, step.finishReason ?? (toolCalls.length > 0 ? 'tool_calls' : 'stop')));
      if (step.usage !== false) {
        const u = step.usage ?? { prompt_tokens: 42, completion_tokens: 7 };
        const usage = {
          prompt_tokens: u.prompt_tokens,
          completion_tokens: u.completion_tokens,
          total_tokens: u.total_tokens ?? u.prompt_tokens + u.completion_tokens,
        };
        tail.push(
          `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [], usage })}\n\n`,
        );
      }
      tail.push('data: [DONE]\n\n');
    }
    const sent = then === 'done' ? content : content.slice(0, step.afterChunks ?? content.length);

    const events = [...sent, ...tail];
    const delayMs = step.chunkDelayMs ?? defaultDelay;
    await streamEvents(res, delayMs <= 0 ? [events.join('')] : events, {
      headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' },
      delayMs,
      then,
    });
  }

  const http = await listenLocal(
    handle,
    (res, err) => {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `fake server bug: ${String(err)}`, type: 'server_error' } }));
    },
    options.port ?? 0,
  );
  const port = http.port;

  return {
    url: `http://127.0.0.1:${port}/v1`,
    port,
    requests,
    requestsFor: (model) => requests.filter((r) => r.model === model),
    setScript(model, script) {
      models.set(model, { script, count: 0 });
    },
    inFlight: (model) => flying.get(model ?? '\u0000all') ?? 0,
    peakInFlight: (model) => peaks.get(model ?? '\u0000all') ?? 0,
    reset() {
      requests.length = 0;
      peaks.clear();
      for (const [key, value] of flying) peaks.set(key, value);
      responseCounter = 0;
      for (const state of models.values()) state.count = 0;
    },
    close: http.close,
  };
}
