/**
 * A fake OpenAI **Responses** API (`POST …/v1/responses` with `stream: true`) that streams SSE the
 * way the Codex CLI reads it: `response.created`, `response.output_item.added` / `.done` for
 * `reasoning`, `message` and `function_call` items, `response.output_text.delta`, `response.completed`;
 * or an HTTP error, a dropped socket, silence.
 *
 * Codex only accepts model slugs it knows, so behaviour is chosen by the **path** of the base URL,
 * not by the model id: `server.urlFor('tool')` is `http://127.0.0.1:PORT/tool/v1`, and every request
 * to it runs the script `tool`. Scripts work like src/demo/model-server.ts: a step, an array of steps
 * (request n of that script gets step n, the last one repeats), or a function of the request.
 *
 * Plain TypeScript + node:http only, no test-framework imports.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import {
  isHangStep,
  isHttpErrorStep,
  listenLocal,
  pickStep,
  readBody,
  streamEvents,
  writeHttpError,
  type HangStep,
  type HttpErrorStep,
  type ScriptOf,
} from '../../src/demo/scripted-http.ts';

export interface ResponsesRequestBody {
  model?: string;
  input?: Array<Record<string, unknown>>;
  tools?: unknown[];
  stream?: boolean;
  [key: string]: unknown;
}

export interface RecordedResponsesRequest {
  /** 0-based order over all requests this server received. */
  index: number;
  /** 0-based order among the requests for this script. */
  scriptIndex: number;
  script: string;
  body: ResponsesRequestBody;
  headers: IncomingHttpHeaders;
  /** Date.now() when the body was fully received. */
  at: number;
}

export interface FunctionCallSpec {
  /** Default `call_fake_<n>_<i>`: n = function_call_output items in the request + 1. */
  callId?: string;
  /** Codex's shell tool is `exec_command` with `{ cmd }`. */
  name: string;
  arguments: string | Record<string, unknown>;
}

export interface ResponsesStreamStep {
  /** A reasoning item whose summary is this text. */
  reasoning?: string;
  /** An assistant message; an array is sent as that many `output_text.delta` events. */
  text?: string | string[];
  functionCalls?: FunctionCallSpec[];
  /** `response.completed` usage. Default 42 in / 12 out. */
  usage?: { input_tokens: number; output_tokens: number };
  /** Delay between events in ms. Default 20. */
  eventDelayMs?: number;
  /**
   * `done` (default): every event, then `response.completed`. `failed`: every event, then `response.failed`
   * with `error`. `drop` / `hang`: after `afterEvents` events, destroy the socket / go silent.
   */
  then?: 'done' | 'failed' | 'drop' | 'hang';
  /** The `response.failed` error (`then: 'failed'`). Default `{ code: 'server_error', message: 'fake failure' }`. */
  error?: { code: string; message: string };
  afterEvents?: number;
}

/** The default body is `defaultErrorBody(status)` (`{ error: { message: 'fake …', type } }`). */
export type ResponsesHttpErrorStep = HttpErrorStep;
export type ResponsesHangStep = HangStep;

export type ResponsesStep = ResponsesStreamStep | ResponsesHttpErrorStep | ResponsesHangStep;
type ResponsesScriptContext = { body: ResponsesRequestBody; index: number };
export type ResponsesScriptFn = (ctx: ResponsesScriptContext) => ResponsesStep;
export type ResponsesScript = ScriptOf<ResponsesStep, ResponsesScriptContext>;

/** `function_call_output` items in the request's input (tool results the client sends back). */
export function functionCallOutputs(body: ResponsesRequestBody): Array<Record<string, unknown>> {
  return (body.input ?? []).filter((item) => item.type === 'function_call_output');
}

export function hasFunctionCallOutput(body: ResponsesRequestBody): boolean {
  return functionCallOutputs(body).length > 0;
}

/** The texts of the user messages in the request's input, in order. */
export function userTexts(body: ResponsesRequestBody): string[] {
  const out: string[] = [];
  for (const item of body.input ?? []) {
    if (item.type !== 'message' || item.role !== 'user' || !Array.isArray(item.content)) continue;
    for (const part of item.content as Array<Record<string, unknown>>)
      if (typeof part.text === 'string') out.push(part.text);
  }
  return out;
}

const afterTool =
  (first: ResponsesStep, then: ResponsesStep): ResponsesScriptFn =>
  ({ body }) =>
    hasFunctionCallOutput(body) ? then : first;
const shell = (cmd: string): FunctionCallSpec => ({ name: 'exec_command', arguments: { cmd } });

export const DEFAULT_TEXT = 'Hello from the fake model.';

/** Built-in scripts, keyed by the first path segment of the base URL. */
export function builtinResponsesScripts(): Record<string, ResponsesScript> {
  return {
    text: { reasoning: '**Greeting**\n\nThe user wants a greeting.', text: ['Hello', ' from the', ' fake', ' model.'] },
    'text-plain': { text: DEFAULT_TEXT },
    tool: afterTool({ functionCalls: [shell('echo hi')] }, { text: 'The command printed: hi' }),
    'tool-fail': afterTool(
      { functionCalls: [shell('echo failing >&2; ls /nonexistent-fake-dir; exit 3')] },
      { text: 'The command failed.' },
    ),
    'two-tools': afterTool({ functionCalls: [shell('echo one'), shell('echo two')] }, { text: 'Both commands ran.' }),
    'text-tool-text': afterTool(
      { text: 'Let me run a command.', functionCalls: [shell('echo hi')] },
      { text: 'The command printed hi. Done.' },
    ),
    /** A write into the cwd: read-only sandbox denies it. */
    'tool-write': afterTool(
      { functionCalls: [shell('echo hi > written.txt && cat written.txt')] },
      { text: 'Tried to write.' },
    ),
    'long-tool': afterTool({ functionCalls: [shell('sleep 2741; echo done')] }, { text: 'Slept.' }),
    'long-tool-setsid': afterTool({ functionCalls: [shell('setsid sleep 2742 & sleep 2743')] }, { text: 'Slept.' }),
    http400: { status: 400 },
    http401: { status: 401 },
    http429: { status: 429, headers: { 'retry-after': '7' } },
    http500: { status: 500 },
    http503: { status: 503 },
    midclose: { text: ['Partial', ' answer', ' never', ' finished'], then: 'drop', afterEvents: 4 },
    hang: { hang: true },
    'hang-midstream': { text: ['Partial', ' answer'], then: 'hang', afterEvents: 3 },
  };
}

const DEFAULT_ERRORS: Record<number, [string, string]> = {
  400: ['fake bad request', 'invalid_request_error'],
  401: ['fake invalid api key', 'invalid_request_error'],
  403: ['fake forbidden', 'permission_error'],
  429: ['fake rate limit exceeded', 'rate_limit_exceeded'],
  500: ['fake internal server error', 'server_error'],
  503: ['fake service unavailable', 'server_error'],
};

export function defaultErrorBody(status: number): {
  error: { message: string; type: string; code: string | null; param: null };
} {
  const [message, type] = DEFAULT_ERRORS[status] ?? [`fake http ${status}`, 'server_error'];
  return { error: { message, type, code: null, param: null } };
}

export interface FakeResponsesServerOptions {
  scripts?: Record<string, ResponsesScript>;
  /** Default delay between SSE events in ms. Default 20. */
  eventDelayMs?: number;
}

export interface FakeResponsesServer {
  /** `http://127.0.0.1:PORT` */
  origin: string;
  port: number;
  /** The base URL (`…/<script>/v1`) that runs `script` for every request. */
  urlFor(script: string): string;
  requests: RecordedResponsesRequest[];
  requestsFor(script: string): RecordedResponsesRequest[];
  setScript(script: string, value: ResponsesScript): void;
  reset(): void;
  close(): Promise<void>;
}

export async function startFakeResponsesServer(options: FakeResponsesServerOptions = {}): Promise<FakeResponsesServer> {
  const defaultDelay = options.eventDelayMs ?? 20;
  const scripts = new Map<string, { script: ResponsesScript; count: number }>();
  for (const [name, script] of Object.entries({ ...builtinResponsesScripts(), ...(options.scripts ?? {}) }))
    scripts.set(name, { script, count: 0 });
  const requests: RecordedResponsesRequest[] = [];
  let responseCounter = 0;

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '').split('?')[0] ?? '';
    const match = /^\/([\w.-]+)\/v1\/responses$/.exec(path);
    if (req.method !== 'POST' || match?.[1] === undefined) {
      writeError(res, {
        status: 404,
        body: { error: { message: `fake: no route ${req.method} ${path}`, type: 'not_found_error' } },
      });
      return;
    }
    const name = match[1];
    const raw = await readBody(req);
    let body: ResponsesRequestBody;
    try {
      body = JSON.parse(raw) as ResponsesRequestBody;
    } catch {
      writeError(res, {
        status: 400,
        body: { error: { message: 'fake: invalid JSON body', type: 'invalid_request_error' } },
      });
      return;
    }
    const state = scripts.get(name);
    const scriptIndex = state === undefined ? 0 : state.count++;
    requests.push({ index: requests.length, scriptIndex, script: name, body, headers: req.headers, at: Date.now() });
    const step = pick(name, state?.script, body, scriptIndex);
    if (isHangStep(step)) return;
    if (isHttpErrorStep(step)) {
      writeError(res, step);
      return;
    }
    await writeStream(res, step, body);
  }

  function pick(
    name: string,
    script: ResponsesScript | undefined,
    body: ResponsesRequestBody,
    index: number,
  ): ResponsesStep {
    if (script === undefined)
      return { status: 404, body: { error: { message: `fake: no script ${name}`, type: 'not_found_error' } } };
    return pickStep(script, { body, index }, name);
  }

  function writeError(res: ServerResponse, step: ResponsesHttpErrorStep): void {
    writeHttpError(res, step, step.body === undefined ? defaultErrorBody(step.status) : step.body);
  }

  async function writeStream(
    res: ServerResponse,
    step: ResponsesStreamStep,
    body: ResponsesRequestBody,
  ): Promise<void> {
    const responseId = `resp_fake_${++responseCounter}`;
    const model = typeof body.model === 'string' ? body.model : 'fake';
    const turn = functionCallOutputs(body).length + 1;
    const events: Array<Record<string, unknown>> = [];
    const output: Array<Record<string, unknown>> = [];
    const response = (status: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
      id: responseId,
      object: 'response',
      created_at: Math.floor(Date.now() / 1000),
      status,
      model,
      output: status === 'completed' ? output : [],
      ...extra,
    });
    events.push({ type: 'response.created', response: response('in_progress') });
    events.push({ type: 'response.in_progress', response: response('in_progress') });

    if (step.reasoning !== undefined) {
      const index = output.length;
      const id = `rs_fake_${responseCounter}_${index}`;
      const item = { id, type: 'reasoning', summary: [{ type: 'summary_text', text: step.reasoning }] };
      events.push({
        type: 'response.output_item.added',
        output_index: index,
        item: { id, type: 'reasoning', summary: [] },
      });
      events.push({
        type: 'response.reasoning_summary_part.added',
        item_id: id,
        output_index: index,
        summary_index: 0,
        part: { type: 'summary_text', text: '' },
      });
      events.push({
        type: 'response.reasoning_summary_text.delta',
        item_id: id,
        output_index: index,
        summary_index: 0,
        delta: step.reasoning,
      });
      events.push({
        type: 'response.reasoning_summary_text.done',
        item_id: id,
        output_index: index,
        summary_index: 0,
        text: step.reasoning,
      });
      events.push({
        type: 'response.reasoning_summary_part.done',
        item_id: id,
        output_index: index,
        summary_index: 0,
        part: { type: 'summary_text', text: step.reasoning },
      });
      events.push({ type: 'response.output_item.done', output_index: index, item });
      output.push(item);
    }
    if (step.text !== undefined) {
      const chunks = typeof step.text === 'string' ? [step.text] : step.text;
      const full = chunks.join('');
      const index = output.length;
      const id = `msg_fake_${responseCounter}_${index}`;
      const part = { type: 'output_text', text: full, annotations: [] };
      events.push({
        type: 'response.output_item.added',
        output_index: index,
        item: { id, type: 'message', role: 'assistant', status: 'in_progress', content: [] },
      });
      events.push({
        type: 'response.content_part.added',
        item_id: id,
        output_index: index,
        content_index: 0,
        part: { ...part, text: '' },
      });
      for (const delta of chunks)
        events.push({ type: 'response.output_text.delta', item_id: id, output_index: index, content_index: 0, delta });
      events.push({
        type: 'response.output_text.done',
        item_id: id,
        output_index: index,
        content_index: 0,
        text: full,
      });
      events.push({ type: 'response.content_part.done', item_id: id, output_index: index, content_index: 0, part });
      const item = { id, type: 'message', role: 'assistant', status: 'completed', content: [part] };
      events.push({ type: 'response.output_item.done', output_index: index, item });
      output.push(item);
    }
    for (const [i, call] of (step.functionCalls ?? []).entries()) {
      const index = output.length;
      const id = `fc_fake_${responseCounter}_${index}`;
      const callId = call.callId ?? `call_fake_${turn}_${i}`;
      const args = typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments);
      events.push({
        type: 'response.output_item.added',
        output_index: index,
        item: { id, type: 'function_call', status: 'in_progress', call_id: callId, name: call.name, arguments: '' },
      });
      events.push({ type: 'response.function_call_arguments.delta', item_id: id, output_index: index, delta: args });
      events.push({ type: 'response.function_call_arguments.done', item_id: id, output_index: index, arguments: args });
      const item = {
        id,
        type: 'function_call',
        status: 'completed',
        call_id: callId,
        name: call.name,
        arguments: args,
      };
      events.push({ type: 'response.output_item.done', output_index: index, item });
      output.push(item);
    }
    const then = step.then ?? 'done';
    const usage = step.usage ?? { input_tokens: 42, output_tokens: 12 };
    const failed = {
      type: 'response.failed',
      response: response('failed', { error: step.error ?? { code: 'server_error', message: 'fake failure' } }),
    };
    const sent =
      then === 'failed'
        ? [...events, failed]
        : then === 'done'
          ? [
              ...events,
              {
                type: 'response.completed',
                response: response('completed', {
                  usage: {
                    input_tokens: usage.input_tokens,
                    input_tokens_details: { cached_tokens: 0 },
                    output_tokens: usage.output_tokens,
                    output_tokens_details: { reasoning_tokens: 0 },
                    total_tokens: usage.input_tokens + usage.output_tokens,
                  },
                }),
              },
            ]
          : events.slice(0, step.afterEvents ?? events.length);

    await streamEvents(
      res,
      sent.map((event) => `event: ${String(event.type)}\ndata: ${JSON.stringify(event)}\n\n`),
      {
        headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' },
        delayMs: step.eventDelayMs ?? defaultDelay,
        then: then === 'failed' ? 'done' : then,
      },
    );
  }

  const http = await listenLocal(handle, (res, err) => {
    res.writeHead(500, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message: `fake server bug: ${String(err)}`, type: 'server_error' } }));
  });
  const port = http.port;
  const origin = `http://127.0.0.1:${port}`;
  return {
    origin,
    port,
    urlFor: (script) => `${origin}/${script}/v1`,
    requests,
    requestsFor: (script) => requests.filter((r) => r.script === script),
    setScript(script, value) {
      scripts.set(script, { script: value, count: 0 });
    },
    reset() {
      requests.length = 0;
      responseCounter = 0;
      for (const state of scripts.values()) state.count = 0;
    },
    close: http.close,
  };
}
