import { describe, expect, it } from 'vitest';
import { agentEnv } from '../../../src/agents/shared/agent-env.ts';

describe('agentEnv', () => {
  it("drops sessiond's secrets (Redis URL, API tokens, the HTTP signing secret) and keeps the rest", () => {
    const env = agentEnv(
      { EXTRA: '1' },
      {
        PATH: '/bin',
        REDIS_URL: 'redis://:pw@h',
        SESSIOND_API_TOKEN: 't',
        SESSIOND_API_TOKENS: '[]',
        SESSIOND_HTTP_SECRET: 's',
        HOME: '/home/x',
      },
    );
    expect(env).toEqual({ PATH: '/bin', HOME: '/home/x', EXTRA: '1' });
  });
});
