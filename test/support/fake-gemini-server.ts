/**
 * A fake Gemini API (`POST /v1beta/models/<model>:streamGenerateContent?alt=sse`) for running the
 * real `gemini` CLI offline: SSE chunks of `GenerateContentResponse` (`candidates[0].content.parts`
 * with `text` / `functionCall`, `finishReason`, `usageMetadata`), or an HTTP error with Google's
 * error JSON (`{"error":{"code":500,"message":…,"status":"INTERNAL"}}`).
 *
 * Behaviour is chosen by the model id in the URL (the CLI is always run with an explicit `-m`), like
 * src/demo/model-server.ts: a script is one step, an array of steps (request n of that model gets
 * step n, the last one repeats), or a function of the request. Every request is recorded, and any
 * other route answers 404 (and is recorded too, so a test can see unexpected traffic).
 *
 * Plain TypeScript + node:http, no test-framework imports.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import {
  isHangStep,
  isHttpErrorStep,
  listenLocal,
  pickStep,
  readBody,
  streamEvents,
  words,
  writeHttpError,
  type HangStep,
  type HttpErrorStep,
  type ScriptOf,
  type StreamPacing,
} from '../../src/demo/scripted-http.ts';

export interface GeminiPart {
  text?: string;
  thought?: boolean;
  functionCall?: { id?: string; name?: string; args?: unknown };
  functionResponse?: { id?: string; name?: string; response?: unknown };
  [key: string]: unknown;
}

export interface GeminiContent {
  role?: string;
  parts?: GeminiPart[];
}

export interface GeminiRequestBody {
  contents?: GeminiContent[];
  tools?: Array<{ functionDeclarations?: Array<{ name?: string }> }>;
  [key: string]: unknown;
}

export interface GeminiRecordedRequest {
  /** 0-based order over every request this server received. */
  index: number;
  /** 0-based order among the requests for this model id and method. */
  modelIndex: number;
  method: string;
  path: string;
  model: string;
  /** `streamGenerateContent`, `generateContent`, `countTokens`… ('' for an unknown route). */
  action: string;
  body: GeminiRequestBody;
  headers: IncomingHttpHeaders;
  at: number;
}

export interface FunctionCallSpec {
  name: string;
  args: Record<string, unknown>;
  id?: string;
}

/** `chunkDelayMs` defaults to 30; `then: 'drop'` destroys the socket after `afterChunks` chunks, `hang` sends nothing more. */
export interface GeminiStreamStep extends StreamPacing {
  /** Thought chunks (`{text, thought: true}` parts), sent first. */
  thoughts?: string[];
  /** Text chunks; a string is split at word boundaries. */
  text?: string | string[];
  /** Sent after the text, one chunk each. */
  functionCalls?: FunctionCallSpec[];
  /** Default `STOP`. */
  finishReason?: string;
  /** Default prompt 42 / candidates 12. `false`: none. */
  usage?: { promptTokenCount: number; candidatesTokenCount: number } | false;
  afterChunks?: number;
}

/** The default body is `googleErrorBody(status)`. */
export type GeminiErrorStep = HttpErrorStep;
export type GeminiHangStep = HangStep;

export type GeminiStep = GeminiStreamStep | GeminiErrorStep | GeminiHangStep;
type GeminiScriptContext = { request: GeminiRecordedRequest; body: GeminiRequestBody; index: number };
export type GeminiScriptFn = (ctx: GeminiScriptContext) => GeminiStep;
export type GeminiScript = ScriptOf<GeminiStep, GeminiScriptContext>;

const GOOGLE_STATUS: Record<number, [string, string]> = {
  400: ['INVALID_ARGUMENT', 'Invalid request (fake)'],
  401: ['UNAUTHENTICATED', 'API key not valid (fake)'],
  403: ['PERMISSION_DENIED', 'Permission denied (fake)'],
  404: ['NOT_FOUND', 'Not found (fake)'],
  429: ['RESOURCE_EXHAUSTED', 'Resource has been exhausted (fake)'],
  500: ['INTERNAL', 'Internal error (fake)'],
  503: ['UNAVAILABLE', 'The model is overloaded (fake)'],
};

/** Google's error JSON for a status. */
export function googleErrorBody(status: number): { error: { code: number; message: string; status: string } } {
  const [name, message] = GOOGLE_STATUS[status] ?? ['UNKNOWN', `HTTP ${status} (fake)`];
  return { error: { code: status, message, status: name } };
}

/** True once the request carries a function response (the tool ran). */
export function hasFunctionResponse(body: GeminiRequestBody): boolean {
  return (body.contents ?? []).some((c) => (c.parts ?? []).some((p) => p.functionResponse !== undefined));
}

/** The function responses of the request, in order. */
export function functionResponses(body: GeminiRequestBody): Array<{ name?: string; response?: unknown }> {
  return (body.contents ?? []).flatMap((c) =>
    (c.parts ?? []).flatMap((p) => (p.functionResponse === undefined ? [] : [p.functionResponse])),
  );
}

/** The text of every user part of the request, in order. */
export function userTexts(body: GeminiRequestBody): string[] {
  return (body.contents ?? [])
    .filter((c) => c.role === 'user')
    .flatMap((c) => (c.parts ?? []).flatMap((p) => (typeof p.text === 'string' ? [p.text] : [])));
}

/** Names of the function declarations the CLI offered the model. */
export function declaredTools(body: GeminiRequestBody): string[] {
  return (body.tools ?? []).flatMap((t) => (t.functionDeclarations ?? []).map((d) => d.name ?? ''));
}

const shell = (command: string): FunctionCallSpec => ({
  name: 'run_shell_command',
  args: { command, description: 'Run a command' },
});
const afterTool =
  (first: GeminiStep, then: GeminiStep): GeminiScriptFn =>
  ({ body }) =>
    hasFunctionResponse(body) ? then : first;

/** Built-in scripts by model id. */
export function geminiBuiltinScripts(): Record<string, GeminiScript> {
  return {
    'fake-text': { text: ['Hello', ' from the', ' fake', ' model.'] },
    'fake-thinking': { thoughts: ['**Planning** Let me', ' think about it.'], text: ['Hello', ' there.'] },
    'fake-tool': afterTool(
      { text: 'I will run a command.', functionCalls: [shell('echo hi')] },
      { text: ['The command ', 'printed: ', 'hi'] },
    ),
    'fake-tool-fail': afterTool(
      { functionCalls: [shell('echo failing >&2; ls /nonexistent-fake-dir; exit 3')] },
      { text: 'The command failed.' },
    ),
    'fake-two-tools': afterTool(
      { functionCalls: [shell('echo one'), shell('echo two')] },
      { text: 'Both commands ran.' },
    ),
    /** A tool that is not registered in the default approval mode (shell tools are hidden). */
    'fake-unknown-tool': afterTool(
      { functionCalls: [{ name: 'no_such_tool', args: { x: 1 } }] },
      { text: 'No such tool.' },
    ),
    /** A long tool: a background grandchild in its own session, and a foreground sleep. */
    'fake-long-tool': afterTool(
      { text: 'Sleeping.', functionCalls: [shell('setsid sleep 1011 & sleep 1012; echo done')] },
      { text: 'Slept.' },
    ),
    /** The tool ran, then the next request fails. */
    'fake-tool-then-500': afterTool({ functionCalls: [shell('echo hi')] }, { status: 500 }),
    'fake-http400': { status: 400 },
    'fake-http401': { status: 401 },
    'fake-http403': { status: 403 },
    'fake-http429': { status: 429 },
    'fake-http500': { status: 500 },
    'fake-http503': { status: 503 },
    'fake-midclose': { text: ['Partial', ' answer', ' never', ' finished'], then: 'drop', afterChunks: 2 },
    'fake-empty': { text: [], finishReason: 'STOP' },
    'fake-hang': { hang: true },
    'fake-hang-midstream': { text: ['Hel', 'lo'], then: 'hang', afterChunks: 1 },
  };
}

export interface FakeGeminiServer {
  /** For GOOGLE_GEMINI_BASE_URL, e.g. `http://127.0.0.1:41691`. */
  url: string;
  port: number;
  requests: GeminiRecordedRequest[];
  /** `streamGenerateContent` / `generateContent` requests for a model id. */
  requestsFor(model: string): GeminiRecordedRequest[];
  setScript(model: string, script: GeminiScript): void;
  reset(): void;
  close(): Promise<void>;
}

const ROUTE = /^\/v1(?:beta|alpha)?\/models\/([^/:]+):([A-Za-z]+)$/;

export async function startFakeGeminiServer(
  options: { scripts?: Record<string, GeminiScript>; chunkDelayMs?: number } = {},
): Promise<FakeGeminiServer> {
  const defaultDelay = options.chunkDelayMs ?? 30;
  const scripts = new Map<string, { script: GeminiScript; count: number }>();
  for (const [id, script] of Object.entries({ ...geminiBuiltinScripts(), ...(options.scripts ?? {}) }))
    scripts.set(id, { script, count: 0 });
  const requests: GeminiRecordedRequest[] = [];

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = decodeURIComponent((req.url ?? '').split('?')[0] ?? '');
    const raw = await readBody(req);
    let body: GeminiRequestBody = {};
    try {
      body = raw === '' ? {} : (JSON.parse(raw) as GeminiRequestBody);
    } catch {
      body = {};
    }
    const route = ROUTE.exec(path);
    const model = route?.[1] ?? '';
    const action = route?.[2] ?? '';
    const state = scripts.get(model);
    const generates = req.method === 'POST' && (action === 'streamGenerateContent' || action === 'generateContent');
    const modelIndex = generates && state !== undefined ? state.count++ : 0;
    const request: GeminiRecordedRequest = {
      index: requests.length,
      modelIndex,
      method: req.method ?? '',
      path,
      model,
      action,
      body,
      headers: req.headers,
      at: Date.now(),
    };
    requests.push(request);
    if (!generates) {
      writeError(res, {
        status: 404,
        body: { error: { code: 404, message: `fake: no route ${req.method} ${path}`, status: 'NOT_FOUND' } },
      });
      return;
    }
    if (state === undefined) {
      writeError(res, {
        status: 404,
        body: { error: { code: 404, message: `models/${model} is not found (fake)`, status: 'NOT_FOUND' } },
      });
      return;
    }
    const step = pickStep(state.script, { request, body, index: modelIndex }, model);
    if (isHangStep(step)) return;
    if (isHttpErrorStep(step)) {
      writeError(res, step);
      return;
    }
    await writeStream(res, model, step, action === 'streamGenerateContent');
  }

  function writeError(res: ServerResponse, step: GeminiErrorStep): void {
    writeHttpError(res, step, step.body ?? googleErrorBody(step.status), 'application/json; charset=UTF-8');
  }

  async function writeStream(res: ServerResponse, model: string, step: GeminiStreamStep, sse: boolean): Promise<void> {
    const chunks: GeminiPart[][] = [];
    for (const thought of step.thoughts ?? []) chunks.push([{ text: thought, thought: true }]);
    for (const text of words(step.text)) chunks.push([{ text }]);
    for (const call of step.functionCalls ?? [])
      chunks.push([
        { functionCall: { ...(call.id === undefined ? {} : { id: call.id }), name: call.name, args: call.args } },
      ]);
    if (chunks.length === 0) chunks.push([{ text: '' }]);
    const then = step.then ?? 'done';
    const sent = then === 'done' ? chunks : chunks.slice(0, step.afterChunks ?? chunks.length);
    const usage = step.usage === false ? undefined : (step.usage ?? { promptTokenCount: 42, candidatesTokenCount: 12 });
    const response = (parts: GeminiPart[], last: boolean): Record<string, unknown> => ({
      candidates: [
        { content: { role: 'model', parts }, index: 0, ...(last ? { finishReason: step.finishReason ?? 'STOP' } : {}) },
      ],
      ...(last && usage !== undefined
        ? { usageMetadata: { ...usage, totalTokenCount: usage.promptTokenCount + usage.candidatesTokenCount } }
        : {}),
      modelVersion: model,
      responseId: `fake-${requests.length}`,
    });
    if (!sse) {
      res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' });
      res.end(JSON.stringify(response(sent.flat(), true)));
      return;
    }
    const events = sent.map(
      (parts, i) => `data: ${JSON.stringify(response(parts, then === 'done' && i === sent.length - 1))}\r\n\r\n`,
    );
    await streamEvents(res, events, {
      headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' },
      delayMs: step.chunkDelayMs ?? defaultDelay,
      then,
    });
  }

  const http = await listenLocal(handle, (res, error) =>
    writeError(res, {
      status: 500,
      body: { error: { code: 500, message: `fake server bug: ${String(error)}`, status: 'INTERNAL' } },
    }),
  );
  const port = http.port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    requestsFor: (model) =>
      requests.filter(
        (r) => r.model === model && (r.action === 'streamGenerateContent' || r.action === 'generateContent'),
      ),
    setScript(model, script) {
      scripts.set(model, { script, count: 0 });
    },
    reset() {
      requests.length = 0;
      for (const state of scripts.values()) state.count = 0;
    },
    close: http.close,
  };
}
