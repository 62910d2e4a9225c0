/**
 * A fake Anthropic Messages API (`POST /v1/messages`, SSE) for running the real Claude Code CLI
 * offline. Behaviour is chosen by the `model` of each request (Claude Code sends what `--model`
 * names), scripted the way src/demo/model-server.ts scripts its OpenAI-compatible models:
 *   - an array of steps: request n (per model) gets step n, the last step repeats, or
 *   - a function `(ctx) => step` that decides from the request (e.g. "is there a tool result yet?").
 *
 * Steps:
 *   - stream: `{ thinking, text, toolUses }` as message_start, content_block_start/delta/stop
 *     (thinking_delta + signature_delta, text_delta, input_json_delta), message_delta, message_stop;
 *     `then: 'hang'` stops after `afterEvents` block events and sends nothing more, `then: 'drop'` destroys the socket.
 *   - error: `{ status }` with Anthropic's JSON error body (`{type:"error", error:{type, message}}`).
 *   - hang: `{ hang: true }` never sends headers.
 *
 * `HEAD /` (Claude Code's connectivity probe) is answered 200. Plain node:http, no test-framework imports.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import {
  isHangStep,
  isHttpErrorStep,
  listenLocal,
  pickStep,
  readBody,
  splitInto,
  streamEvents,
  words,
  type HangStep,
  type HttpErrorStep,
  type ScriptOf,
  type StreamPacing,
} from '../../src/demo/scripted-http.ts';

// An error step's default body is `anthropicErrorBody(status)`.

export interface AnthropicRequestBody {
  model?: string;
  messages?: { role: string; content: unknown }[];
  system?: unknown;
  tools?: unknown[];
  stream?: boolean;
  [key: string]: unknown;
}

export interface RecordedRequest {
  index: number;
  modelIndex: number;
  model: string;
  path: string;
  body: AnthropicRequestBody;
  headers: IncomingHttpHeaders;
  at: number;
}

export interface ToolUseSpec {
  /** Default `toolu_fake_<turn>_<i>` (turn = assistant messages in the request + 1). */
  id?: string;
  name: string;
  input: Record<string, unknown>;
  /** Number of input_json_delta fragments. Default 3. */
  fragments?: number;
}

/** A streamed message; `chunkDelayMs` (between SSE events) defaults to 20. */
export interface StreamStep extends StreamPacing {
  thinking?: string | string[];
  text?: string | string[];
  toolUses?: ToolUseSpec[];
  /** Default `tool_use` when toolUses is non-empty, else `end_turn`. */
  stopReason?: string;
  /** For `hang` / `drop`: how many events after message_start are sent first. Default: all block events. */
  afterEvents?: number;
}

export type ScriptStep = StreamStep | HttpErrorStep | HangStep;
export interface ScriptContext {
  request: RecordedRequest;
  body: AnthropicRequestBody;
  index: number;
}
export type Script = ScriptOf<ScriptStep, ScriptContext>;

/** True when a user message of the request carries a `tool_result` block. */
export function hasToolResult(body: AnthropicRequestBody): boolean {
  return (body.messages ?? []).some(
    (m) =>
      m.role === 'user' &&
      Array.isArray(m.content) &&
      (m.content as { type?: unknown }[]).some((b) => b.type === 'tool_result'),
  );
}

const ERROR_TYPES: Record<number, [string, string]> = {
  400: ['invalid_request_error', 'Bad request (fake)'],
  401: ['authentication_error', 'invalid x-api-key (fake)'],
  403: ['permission_error', 'Forbidden (fake)'],
  404: ['not_found_error', 'Not found (fake)'],
  429: ['rate_limit_error', 'Rate limited (fake)'],
  500: ['api_error', 'Internal server error (fake)'],
  503: ['api_error', 'Service unavailable (fake)'],
  529: ['overloaded_error', 'Overloaded (fake)'],
};

export function anthropicErrorBody(status: number): unknown {
  const [type, message] = ERROR_TYPES[status] ?? ['api_error', `HTTP ${status} (fake)`];
  return { type: 'error', error: { type, message } };
}

export const DEFAULT_TEXT = 'Hello from the fake model.';
const bash = (command: string): ToolUseSpec => ({ name: 'Bash', input: { command, description: 'Run a command' } });
const afterTool =
  (first: ScriptStep, then: ScriptStep) =>
  (ctx: ScriptContext): ScriptStep =>
    hasToolResult(ctx.body) ? then : first;

/** Built-in scripts by model id. */
export function builtinScripts(): Record<string, Script> {
  return {
    text: { thinking: 'The user wants a greeting. I will answer briefly.', text: DEFAULT_TEXT },
    'text-plain': { text: DEFAULT_TEXT },
    tool: afterTool(
      { text: 'I will run a command.', toolUses: [bash('echo hi')] },
      { text: 'The command printed: hi' },
    ),
    'tool-fail': afterTool({ toolUses: [bash('ls nonexistent-fake-dir')] }, { text: 'The command failed.' }),
    'two-tools': afterTool(
      { text: 'Two commands.', toolUses: [bash('echo one'), bash('echo two')] },
      { text: 'Both ran.' },
    ),
    'tool-denied': afterTool({ toolUses: [bash('touch made-by-tool.txt && echo hi')] }, { text: 'Done.' }),
    /**
     * A tool that runs long. Claude Code 2.1.332 refuses `sleep N` as a tool ("use Monitor"),
     * so it is a node timer; `node -e` needs `allowedTools: ["Bash"]` in the default permission mode.
     */
    'long-tool': afterTool(
      { text: 'I will wait.', toolUses: [bash('node -e "setTimeout(() => {}, 1061e3)"')] },
      { text: 'Waited.' },
    ),
    /** The same in the background and in a new session (setsid): out of reach of Claude Code's own group kill. */
    'long-tool-bg': afterTool(
      {
        toolUses: [
          bash('node -e "setTimeout(() => {}, 1062e3)" & setsid node -e "setTimeout(() => {}, 1063e3)" & wait'),
        ],
      },
      { text: 'Waited.' },
    ),
    http400: { status: 400 },
    http401: { status: 401 },
    http429: { status: 429, headers: { 'retry-after': '7' } },
    http500: { status: 500 },
    http529: { status: 529 },
    'hang-midstream': { text: ['Partial', ' answer', ' never', ' finished'], then: 'hang', afterEvents: 3 },
    midclose: { text: ['Partial', ' answer', ' never', ' finished'], then: 'drop', afterEvents: 3 },
    hang: { hang: true },
  };
}

export interface FakeAnthropicServer {
  /** For ANTHROPIC_BASE_URL, e.g. `http://127.0.0.1:41691` (no `/v1`). */
  url: string;
  port: number;
  /** Every `POST …/messages`, in arrival order. */
  requests: RecordedRequest[];
  /** Every request line (method and path), HEAD probes included. */
  hits: string[];
  requestsFor(model: string): RecordedRequest[];
  setScript(model: string, script: Script): void;
  reset(): void;
  close(): Promise<void>;
}

export async function startFakeAnthropicServer(
  options: { scripts?: Record<string, Script>; chunkDelayMs?: number } = {},
): Promise<FakeAnthropicServer> {
  const defaultDelay = options.chunkDelayMs ?? 20;
  const models = new Map<string, { script: Script; count: number }>();
  for (const [id, script] of Object.entries({ ...builtinScripts(), ...(options.scripts ?? {}) }))
    models.set(id, { script, count: 0 });
  const requests: RecordedRequest[] = [];
  const hits: string[] = [];
  let messageCounter = 0;

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '').split('?')[0] ?? '';
    hits.push(`${req.method ?? '?'} ${req.url ?? ''}`);
    if (req.method === 'HEAD' || (req.method === 'GET' && path === '/')) {
      res.writeHead(200);
      res.end();
      return;
    }
    if (req.method !== 'POST' || !path.endsWith('/v1/messages')) {
      writeError(res, {
        status: 404,
        body: { type: 'error', error: { type: 'not_found_error', message: `fake: no route ${req.method} ${path}` } },
      });
      return;
    }
    const raw = await readBody(req);
    let body: AnthropicRequestBody;
    try {
      body = JSON.parse(raw) as AnthropicRequestBody;
    } catch {
      writeError(res, { status: 400 });
      return;
    }
    const model = typeof body.model === 'string' ? body.model : '';
    const state = models.get(model);
    const modelIndex = state ? state.count++ : requests.filter((r) => r.model === model).length;
    const request: RecordedRequest = {
      index: requests.length,
      modelIndex,
      model,
      path: req.url ?? '',
      body,
      headers: req.headers,
      at: Date.now(),
    };
    requests.push(request);
    const script: Script = state?.script ?? {
      status: 404,
      body: { type: 'error', error: { type: 'not_found_error', message: `model: ${model}` } },
    };
    const step = pickStep(script, { request, body, index: modelIndex }, model);
    if (isHangStep(step)) return;
    if (isHttpErrorStep(step)) {
      writeError(res, step);
      return;
    }
    await writeStream(res, model, step, body);
  }

  function writeError(res: ServerResponse, step: HttpErrorStep): void {
    if (res.destroyed) return;
    const payload = step.body ?? anthropicErrorBody(step.status);
    res.writeHead(step.status, {
      'content-type': 'application/json',
      'request-id': `req_fake_${requests.length}`,
      ...(step.headers ?? {}),
    });
    res.end(typeof payload === 'string' ? payload : JSON.stringify(payload));
  }

  async function writeStream(
    res: ServerResponse,
    model: string,
    step: StreamStep,
    body: AnthropicRequestBody,
  ): Promise<void> {
    const id = `msg_fake_${++messageCounter}`;
    const sse = (type: string, data: Record<string, unknown>): string =>
      `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
    const turn = (body.messages ?? []).filter((m) => m.role === 'assistant').length + 1;
    const blocks: string[] = [];
    let index = 0;
    const thinking = words(step.thinking);
    if (thinking.length > 0) {
      blocks.push(
        sse('content_block_start', { index, content_block: { type: 'thinking', thinking: '', signature: '' } }),
      );
      for (const t of thinking)
        blocks.push(sse('content_block_delta', { index, delta: { type: 'thinking_delta', thinking: t } }));
      blocks.push(
        sse('content_block_delta', { index, delta: { type: 'signature_delta', signature: 'ZmFrZS1zaWduYXR1cmU=' } }),
      );
      blocks.push(sse('content_block_stop', { index }));
      index += 1;
    }
    const text = words(step.text);
    if (text.length > 0) {
      blocks.push(sse('content_block_start', { index, content_block: { type: 'text', text: '' } }));
      for (const t of text) blocks.push(sse('content_block_delta', { index, delta: { type: 'text_delta', text: t } }));
      blocks.push(sse('content_block_stop', { index }));
      index += 1;
    }
    const toolUses = step.toolUses ?? [];
    toolUses.forEach((tool, i) => {
      const toolId = tool.id ?? `toolu_fake_${turn}_${i}`;
      blocks.push(
        sse('content_block_start', {
          index,
          content_block: { type: 'tool_use', id: toolId, name: tool.name, input: {} },
        }),
      );
      for (const part of splitInto(JSON.stringify(tool.input), tool.fragments ?? 3)) {
        blocks.push(sse('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: part } }));
      }
      blocks.push(sse('content_block_stop', { index }));
      index += 1;
    });
    const then = step.then ?? 'done';
    const start = sse('message_start', {
      message: {
        id,
        type: 'message',
        role: 'assistant',
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 42, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
      },
    });
    const tail =
      then === 'done'
        ? [
            sse('message_delta', {
              delta: {
                stop_reason: step.stopReason ?? (toolUses.length > 0 ? 'tool_use' : 'end_turn'),
                stop_sequence: null,
              },
              usage: { output_tokens: 12 },
            }),
            sse('message_stop', {}),
          ]
        : [];
    const events = [start, ...(then === 'done' ? blocks : blocks.slice(0, step.afterEvents ?? blocks.length)), ...tail];
    await streamEvents(res, events, {
      headers: {
        'content-type': 'text/event-stream',
        'cache-control': 'no-cache',
        connection: 'keep-alive',
        'request-id': `req_fake_${requests.length}`,
      },
      delayMs: step.chunkDelayMs ?? defaultDelay,
      then,
    });
  }

  const http = await listenLocal(handle, (res, err) =>
    writeError(res, {
      status: 500,
      body: { type: 'error', error: { type: 'api_error', message: `fake server bug: ${String(err)}` } },
    }),
  );
  const port = http.port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    hits,
    requestsFor: (model) => requests.filter((r) => r.model === model),
    setScript(model, script) {
      models.set(model, { script, count: 0 });
    },
    reset() {
      requests.length = 0;
      hits.length = 0;
      messageCounter = 0;
      for (const state of models.values()) state.count = 0;
    },
    close: http.close,
  };
}
