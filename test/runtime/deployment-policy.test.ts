import { describe, expect, it } from 'vitest';
import { piArgs, PiOptionsSchema } from '../../src/agents/pi/options.ts';
import { admitTurn, attemptOptions, deploymentPolicy } from '../../src/runtime/deployment-policy.ts';

describe('what an attempt runs with', () => {
  it('a value the worker’s host configured wins over the caller’s; the host’s idle timeout is only a default', () => {
    const host = { command: '/opt/codex', sandbox: 'read-only', idleTimeoutMs: 600_000, env: { OPENAI_API_KEY: 'k' } };
    expect(attemptOptions(host, { sandbox: 'workspace-write', model: 'm', idleTimeoutMs: 30_000 })).toEqual({
      command: '/opt/codex',
      sandbox: 'read-only',
      idleTimeoutMs: 30_000,
      env: { OPENAI_API_KEY: 'k' },
      model: 'm',
    });
    expect(attemptOptions(host, { model: 'm' }).idleTimeoutMs).toBe(600_000);
  });

  it('pi runs with --no-extensions unless the policy enables them', async () => {
    const off = await admitTurn(deploymentPolicy({ workspace: '/tmp' }), {});
    const on = await admitTurn(
      deploymentPolicy({ workspace: '/tmp', policy: { permissions: { pi: { enable: ['extensions'] } } } }),
      {},
    );
    if (!off.ok || !on.ok) throw new Error('refused');
    const argv = (options: Record<string, unknown>) => piArgs(PiOptionsSchema.parse({ ...options, prompt: 'hi' }));
    expect(argv(off.options)).toContain('--no-extensions');
    expect(argv(on.options)).not.toContain('--no-extensions');
  });
});
