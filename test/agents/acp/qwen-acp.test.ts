import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AcpOptionsInput } from '../../../src/agents/acp/options.ts';
import { runAcp } from '../../../src/agents/acp/provider.ts';
import type { RunContext } from '../../../src/agents/shared/run-attempt.ts';
import { findProcessesByMarker } from '../../../src/process/index.ts';
import { startFakeModelServer, type FakeModelServer } from '../../support/fake-model-server.ts';
import { livePidsMatching } from '../../support/processes.ts';
import { expectContract, expectOneResultPerToolCall, failure, terminalOf } from '../contract.ts';
import { attemptOf, attemptOptions, qwenEnv, textOf, waitFor, type AcpCliEnv } from './acp-clis.ts';

/**
 * The real Qwen Code CLI (0.24.4, pinned in agent-clis/) as an ACP agent (`qwen --acp`), against
 * the fake OpenAI-compatible API on 127.0.0.1, configured as an operator would (see acp-clis.ts).
 */
let server: FakeModelServer;
let env: AcpCliEnv;

const shell = (command: string) => ({ name: 'run_shell_command', arguments: { command } });
const toolResultSeen = (body: { messages?: Array<{ role?: string }> }) =>
  (body.messages ?? []).some((m) => m.role === 'tool');

beforeAll(async () => {
  server = await startFakeModelServer();
  server.setScript('q-tool', ({ body }) =>
    toolResultSeen(body) ? { text: 'The command printed: hi' } : { toolCalls: [shell('echo hi')] },
  );
  server.setScript('q-tool-fail', ({ body }) =>
    toolResultSeen(body) ? { text: 'The command failed.' } : { toolCalls: [shell('ls /nonexistent-fake-dir')] },
  );
  server.setScript('q-tool-asks', ({ body }) =>
    toolResultSeen(body) ? { text: 'Done.' } : { toolCalls: [shell('touch made-by-qwen')] },
  );
  server.setScript('q-long', ({ body }) =>
    toolResultSeen(body) ? { text: 'Slept.' } : { toolCalls: [shell('setsid sleep 1031 & sleep 1032')] },
  );
  env = qwenEnv(`${server.url}/v1`);
});

afterAll(async () => {
  await server?.close();
  env?.cleanup();
});

const attempt = (model: string, extra?: Partial<AcpOptionsInput>, context?: RunContext) =>
  attemptOf(env, model, extra, context);

describe('acp: the real qwen --acp on the fake OpenAI-compatible API', () => {
  it('text: exactly the model text, completed end_turn, no process left', async () => {
    let marker = '';
    const messages = await attempt('text', {}, { onSpawn: (a) => (marker = a.marker) });
    expectContract(messages);
    expect(messages[0]?.type).toBe('session.started');
    expect(textOf(messages)).toBe('Hello from the fake LLM.');
    expect(terminalOf(messages)).toEqual({ type: 'terminal.completed', content: { stopReason: 'end_turn' } });
    expect(await findProcessesByMarker(marker)).toEqual([]);
  });

  it('reasoning arrives as assistant.thought', async () => {
    const messages = await attempt('thinking');
    expect(textOf(messages, 'assistant.thought')).toBe('Let me think about it.');
    expect(textOf(messages)).toBe('Hello there.');
  });

  it('a shell tool: tool.call (its arguments completed by tool.update), tool.completed with its output, then the text', async () => {
    const messages = await attempt('q-tool', { permissionMode: 'allow' });
    expectContract(messages);
    expectOneResultPerToolCall(messages);
    const announced = messages.filter((m) => m.type === 'tool.call' || m.type === 'tool.update');
    expect(announced.at(-1)?.content).toMatchObject({ arguments: { command: 'echo hi' } });
    expect(messages.find((m) => m.type === 'tool.completed')?.content).toMatchObject({
      result: { output: 'hi', exitCode: 0 },
    });
    expect(textOf(messages)).toBe('The command printed: hi');
  });

  it('a failing shell command is tool.failed with its output and exit code, and the turn goes on', async () => {
    const messages = await attempt('q-tool-fail', { permissionMode: 'allow' });
    expectOneResultPerToolCall(messages);
    expect(messages.find((m) => m.type === 'tool.failed')?.content).toMatchObject({ error: { exitCode: 2 } });
    expect(textOf(messages)).toBe('The command failed.');
    expect(terminalOf(messages).type).toBe('terminal.completed');
  });

  it('with the default permissionMode reject a command qwen asks about does not run', async () => {
    const messages = await attempt('q-tool-asks');
    expect(messages.find((m) => m.type === 'tool.failed')).toBeDefined();
    expect(terminalOf(messages).type).toBe('terminal.completed');
    expect(() => writeFileSync(join(env.cwd, 'made-by-qwen'), '', { flag: 'wx' })).not.toThrow();
    rmSync(join(env.cwd, 'made-by-qwen'), { force: true });
  });

  it('a 401 from the API: terminal.failed category auth after one request', async () => {
    const before = server.requestsFor('http401').length;
    const content = failure(await attempt('http401'));
    expect(content.category).toBe('auth');
    expect(server.requestsFor('http401').length - before).toBe(1);
  });

  it('resume in a second turn: session.resumed, and the model sees the first turn', async () => {
    const first = await attempt('text', { prompt: 'First turn' });
    const id = (first[0] as { content: { sessionId: string } }).content.sessionId;
    const second = await attempt('text', { prompt: 'Second turn', session: { mode: 'resume', id } });
    expectContract(second);
    expect(second[0]).toEqual({ type: 'session.resumed', content: { sessionId: id } });
    expect(textOf(second)).toBe('Hello from the fake LLM.');
    const sent = JSON.stringify(
      server
        .requestsFor('text')
        .filter((r) => JSON.stringify(r.body).includes('Second turn'))
        .at(0)?.body,
    );
    expect(sent).toContain('First turn');
  });

  it('cancel during a long shell tool: rejects with the AbortError and no process is left', async () => {
    const controller = new AbortController();
    let marker = '';
    const sleeps = /^sleep 103[12] $/;
    const run = (async () => {
      for await (const m of runAcp(attemptOptions(env, 'q-long', { permissionMode: 'allow', cancelGraceMs: 2000 }), {
        signal: controller.signal,
        onSpawn: (a) => (marker = a.marker),
      })) {
        if (m.type === 'tool.call') {
          await waitFor(() => livePidsMatching(sleeps).length === 2, 'both sleeps to start');
          controller.abort();
        }
      }
    })();
    await expect(run).rejects.toMatchObject({ name: 'AbortError' });
    expect(await findProcessesByMarker(marker)).toEqual([]);
    expect(livePidsMatching(sleeps)).toEqual([]);
  });
});
