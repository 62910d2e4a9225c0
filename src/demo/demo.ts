import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Script } from './model-scripts.ts';

/** The provider name the demo's pi agent dir declares for the scripted model. */
export const DEMO_PROVIDER = 'sessiond-demo';

/** What each demo session shows, and the scripted model that plays it. */
export const DEMO_SCRIPTS: Record<string, Script> = {
  'demo-stream': {
    text: "sessiond streams the agent's answer as it is written: every delta lands in the session's message log in Redis, with its turn, attempt and sequence number.",
    chunkDelayMs: 40,
  },
  'demo-tool': ({ body }) =>
    (body.messages ?? []).some((m) => m.role === 'tool')
      ? { text: "The tool ran in the session's working directory and its output came back to me." }
      : {
          text: 'Let me look around.',
          toolCalls: [{ name: 'bash', arguments: { command: 'echo "hello from a tool call"; uname -s' } }],
        },
  'demo-flaky': [
    { status: 503, headers: { 'retry-after': '1' } },
    { text: 'This answer arrived on the second attempt, after a backoff decided by the session machine.' },
  ],
  'demo-auth': {
    status: 401,
    body: { error: { message: 'invalid API key (scripted)', type: 'authentication_error', code: 'invalid_api_key' } },
  },
  'demo-long': ({ body }) =>
    (body.messages ?? []).some((m) => m.role === 'tool')
      ? { text: 'Done waiting.' }
      : {
          text: 'Starting a long job.',
          toolCalls: [{ name: 'bash', arguments: { command: 'sleep 600 & sleep 601; echo finished' } }],
        },
};

export const DEMO_MODELS = Object.keys(DEMO_SCRIPTS);

/** A pi agent dir whose models.json points at the scripted model (no API key, no network). */
export function writeDemoAgentDir(dir: string, baseUrl: string): void {
  mkdirSync(dir, { recursive: true });
  const models = {
    providers: {
      [DEMO_PROVIDER]: {
        baseUrl,
        api: 'openai-completions',
        apiKey: 'demo-key-not-secret',
        compat: { supportsDeveloperRole: false, supportsReasoningEffort: false },
        models: DEMO_MODELS.map((id) => ({ id })),
      },
    },
  };
  writeFileSync(join(dir, 'models.json'), `${JSON.stringify(models, null, 2)}\n`);
}
