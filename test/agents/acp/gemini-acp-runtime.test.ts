import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { afterAll, describe, expect, it } from 'vitest';
import { deploymentPolicy } from '../../../src/runtime/deployment-policy.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import { startFakeGeminiServer, type FakeGeminiServer } from '../../support/fake-gemini-server.ts';
import { agentRecords, assistantText, turnEnded, useRuntimeSuite } from '../../support/runtime.ts';
import { createGeminiEnv, geminiBin, RECORDING_SETTINGS, type GeminiEnv } from '../gemini/gemini-env.ts';

/** `acp:gemini` (the real gemini 0.61 --acp) through the durable runtime: a 500, then success, one request per attempt. */

let gemini: FakeGeminiServer;
let env: GeminiEnv;
let runtime: Runtime;

useRuntimeSuite('acp-gemini-runtime', {}, async (s) => {
  gemini = await startFakeGeminiServer();
  gemini.setScript('rt-flaky', [{ status: 500 }, { text: ['Recovered', ' after a 500.'] }]);
  env = createGeminiEnv({ serverUrl: gemini.url });
  const cliHome = join(env.root, 'cli-home');
  mkdirSync(join(cliHome, '.gemini'), { recursive: true });
  writeFileSync(join(cliHome, '.gemini', 'settings.json'), JSON.stringify(RECORDING_SETTINGS));
  const { SESSIOND_STATE_DIR: _state, ...geminiEnv } = env.env;
  const operator = {
    'acp:gemini': { command: geminiBin, args: ['--acp', '--model', 'rt-flaky', '--skip-trust'], env: { ...geminiEnv, GEMINI_CLI_HOME: cliHome, GEMINI_CLI_NO_RELAUNCH: 'true' } },
  };
  const policy = deploymentPolicy({ workspace: tmpdir(), agents: operator });
  runtime = new Runtime({ connect: s.h.connect, prefix: s.h.prefix, policy });
  await s.h.startWorker({ agentOptions: operator, policy });
});
afterAll(async () => {
  await runtime?.close();
  await gemini?.close();
  env?.cleanup();
});

describe('acp:gemini in the durable runtime', () => {
  it('a 500 from the API, then success: the session machine retries once, each attempt one request, the turn completes', async () => {
    const { sessionId } = await runtime.enqueue({ prompt: 'Say hello', options: { agent: 'acp:gemini', cwd: env.cwd }, retryPolicy: { maxAttempts: 3, initialDelayMs: 0 } });
    const view = await turnEnded(runtime, sessionId, 1, 120_000);
    expect(view.state).toBe('completed');
    const messages = await runtime.readMessages(sessionId);
    expect(messages.filter((m) => m.type === 'terminal.failed').map((m) => (m.content as { category: string }).category)).toEqual(['server_error']);
    expect(assistantText(messages)).toBe('Recovered after a 500.');
    expect(gemini.requestsFor('rt-flaky')).toHaveLength(2);
    expect(await agentRecords(sessionId)).toEqual([]);
  });
});
