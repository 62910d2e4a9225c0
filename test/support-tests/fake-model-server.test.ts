import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeModelServer, type FakeModelServer } from '../support/fake-model-server.ts';
import { createPiEnv, piArgs, runPi, type PiEnv, type PiEvent } from '../support/pi-env.ts';

let server: FakeModelServer;
let env: PiEnv;

beforeAll(async () => {
  server = await startFakeModelServer();
  env = createPiEnv({
    serverUrl: server.url,
    extraModels: ['queued', 'queued-retry'],
  });
});

afterAll(async () => {
  await server.close();
  env.cleanup();
});

function post(model: string, messages: unknown[] = [{ role: 'user', content: 'hi' }]): Promise<Response> {
  return fetch(`${server.url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages, stream: true }),
  });
}

/** The JSON payloads of an SSE body (without [DONE]) and whether [DONE] was seen. */
function parseSse(text: string): { chunks: Record<string, unknown>[]; done: boolean } {
  const chunks: Record<string, unknown>[] = [];
  let done = false;
  for (const block of text.split('\n\n')) {
    if (!block.startsWith('data: ')) continue;
    const data = block.slice('data: '.length);
    if (data === '[DONE]') done = true;
    else chunks.push(JSON.parse(data) as Record<string, unknown>);
  }
  return { chunks, done };
}

const types = (events: PiEvent[]): string[] => events.map((e) => e.type);
const updates = (events: PiEvent[]): string[] =>
  events.filter((e) => e.type === 'message_update').map((e) => (e.assistantMessageEvent as { type: string }).type);

describe('fake model server over HTTP', () => {
  it('streams OpenAI chat.completion.chunk SSE with a usage chunk and [DONE]', async () => {
    const res = await post('text-burst');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const { chunks, done } = parseSse(await res.text());
    expect(done).toBe(true);
    const choiceChunks = chunks.filter((c) => (c.choices as unknown[]).length > 0);
    const text = choiceChunks
      .map((c) => (c.choices as { delta: { content?: string } }[])[0]?.delta.content ?? '')
      .join('');
    expect(text).toBe('Hello from the fake LLM.');
    expect(chunks[0]).toMatchObject({
      object: 'chat.completion.chunk',
      model: 'text-burst',
      choices: [{ index: 0, delta: { role: 'assistant' } }],
    });
    const last = chunks[chunks.length - 1];
    expect(last).toMatchObject({ choices: [], usage: { prompt_tokens: 42, completion_tokens: 7, total_tokens: 49 } });
    expect(chunks[chunks.length - 2]).toMatchObject({ choices: [{ finish_reason: 'stop' }] });
  });

  it('answers http429 with Retry-After and a JSON error body', async () => {
    const res = await post('http429');
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('7');
    expect(await res.json()).toEqual({
      error: { message: 'fake rate limit exceeded', type: 'rate_limit_error', code: null },
    });
  });

  it('consumes one scripted step per request and repeats the last one', async () => {
    server.setScript('queued', [{ status: 500 }, { status: 503, headers: { 'retry-after': '1' } }, { text: 'ok' }]);
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await post('queued');
      statuses.push(res.status);
      await res.text();
    }
    expect(statuses).toEqual([500, 503, 200, 200]);
    expect(server.requestsFor('queued').map((r) => r.modelIndex)).toEqual([0, 1, 2, 3]);
  });

  it('drops the socket mid-stream for midclose', async () => {
    const res = await post('midclose');
    expect(res.status).toBe(200);
    await expect(res.text()).rejects.toThrow();
  });

  it('never answers hang until the client aborts', async () => {
    const ctrl = new AbortController();
    const pending = fetch(`${server.url}/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ model: 'hang', messages: [] }),
      signal: ctrl.signal,
    });
    const raced = await Promise.race([
      pending.then(() => 'answered'),
      new Promise((r) => setTimeout(() => r('pending'), 300)),
    ]);
    expect(raced).toBe('pending');
    ctrl.abort();
    await expect(pending).rejects.toThrow();
  });
});

describe('pi 0.73.1 against the fake model server', () => {
  it('text: streams text deltas and ends with stopReason stop', async () => {
    const before = server.requestsFor('text').length;
    const run = await runPi({ env, args: piArgs({ model: 'text', prompt: 'Say hello' }) });
    expect(run.code).toBe(0);
    expect(run.stderr).toBe('');
    const t = types(run.events);
    expect(t[0]).toBe('session');
    expect(t).toEqual(
      expect.arrayContaining([
        'agent_start',
        'turn_start',
        'message_start',
        'message_update',
        'message_end',
        'turn_end',
        'agent_end',
      ]),
    );
    expect(t[t.length - 1]).toBe('agent_end');
    expect(updates(run.events).filter((u) => u === 'text_delta')).toHaveLength(5);
    const end = run.events.filter((e) => e.type === 'message_end').pop();
    expect(end?.message).toMatchObject({
      role: 'assistant',
      stopReason: 'stop',
      content: [{ type: 'text', text: 'Hello from the fake LLM.' }],
    });
    const reqs = server.requestsFor('text').slice(before);
    expect(reqs).toHaveLength(1);
    expect(reqs[0]?.body.stream).toBe(true);
    expect(reqs[0]?.body.messages?.at(-1)).toMatchObject({
      role: 'user',
      content: [{ type: 'text', text: 'Say hello' }],
    });
  });

  it('tool: runs bash echo hi, then answers with text on the second request', async () => {
    const before = server.requestsFor('tool').length;
    const run = await runPi({ env, args: piArgs({ model: 'tool', prompt: 'Run echo hi with bash' }) });
    expect(run.code).toBe(0);
    const t = types(run.events);
    expect(t).toEqual(expect.arrayContaining(['tool_execution_start', 'tool_execution_update', 'tool_execution_end']));
    expect(updates(run.events)).toEqual(
      expect.arrayContaining(['toolcall_start', 'toolcall_delta', 'toolcall_end', 'text_delta']),
    );
    const toolEnd = run.events.find((e) => e.type === 'tool_execution_end');
    expect(toolEnd).toMatchObject({
      toolName: 'bash',
      isError: false,
      result: { content: [{ type: 'text', text: 'hi\n' }] },
    });
    expect(t.filter((x) => x === 'turn_start')).toHaveLength(2);
    const reqs = server.requestsFor('tool').slice(before);
    expect(reqs).toHaveLength(2);
    expect(reqs[0]?.body.messages?.some((m) => m.role === 'tool')).toBe(false);
    expect(reqs[1]?.body.messages?.find((m) => m.role === 'tool')).toMatchObject({ content: 'hi\n' });
  });

  it('scripted queue: pi auto-retries a 500 and succeeds on the next step', async () => {
    server.setScript('queued-retry', [{ status: 500 }, { text: 'Hello after retry' }]);
    const retryEnv = createPiEnv({
      serverUrl: server.url,
      extraModels: ['queued-retry'],
      settings: { retry: { enabled: true, maxRetries: 2, baseDelayMs: 50, provider: { maxRetries: 0 } } },
    });
    try {
      const run = await runPi({ env: retryEnv, args: piArgs({ model: 'queued-retry', prompt: 'Say hello' }) });
      expect(run.code).toBe(0);
      expect(server.requestsFor('queued-retry')).toHaveLength(2);
      const t = types(run.events);
      expect(t).toContain('auto_retry_start');
      expect(run.events.find((e) => e.type === 'auto_retry_end')).toMatchObject({ success: true, attempt: 1 });
      const ends = run.events
        .filter((e) => e.type === 'message_end')
        .map((e) => (e.message as { stopReason?: string }).stopReason);
      expect(ends).toEqual([undefined, 'error', 'stop']); // user, failed attempt, retried attempt
    } finally {
      retryEnv.cleanup();
    }
  });

  it('http500 with retries off: one request, error only in the events, exit 0', async () => {
    const before = server.requestsFor('http500').length;
    const run = await runPi({ env, args: piArgs({ model: 'http500', prompt: 'Say hello' }) });
    expect(run.code).toBe(0);
    expect(server.requestsFor('http500').length - before).toBe(1);
    const end = run.events.filter((e) => e.type === 'message_end').pop();
    expect(end?.message).toMatchObject({
      stopReason: 'error',
      errorMessage: '500 fake internal server error',
      content: [],
    });
  });
});
