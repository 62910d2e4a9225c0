import { describe, expect, it } from 'vitest';
import { workspaceStartFailed } from '../../src/runtime/session-loop/workspace-setup.ts';
import { freePort } from '../support/redis.ts';
import { git, host, tempDir, write } from '../workspace/support.ts';

/**
 * How a workspace that could not be prepared fails its attempt, with real git's own errors: a store
 * that cannot be reached is a `network` failure (retried by the default policy), a snapshot the
 * store does not have is `startup` (not retried).
 */
describe('a workspace that could not be prepared', () => {
  it('an unreachable store: network; a snapshot the store lacks: startup', async () => {
    const tmp = tempDir();
    try {
      // Nothing listens on this port: git:// is refused.
      const closed = host(tmp.dir, 'a', `git://127.0.0.1:${await freePort()}/store.git`);
      const ws = await closed.prepare('s1', null);
      write(ws, { 'a.txt': 'a\n' });
      const unreachable = await closed.snapshot('s1', 'start', null).catch((e: unknown) => e);
      expect(workspaceStartFailed(unreachable).content).toMatchObject({ category: 'network' });

      const store = `${tmp.dir}/store.git`;
      git(tmp.dir, 'init', '--quiet', '--bare', store);
      const local = host(tmp.dir, 'b', store);
      const missing = await local.prepare('s1', 'a'.repeat(40)).catch((e: unknown) => e);
      expect(missing).toBeInstanceOf(Error);
      expect(workspaceStartFailed(missing).content).toMatchObject({
        category: 'startup',
        text: expect.stringContaining(`no snapshot ${'a'.repeat(40)}`) as unknown,
      });
    } finally {
      tmp.cleanup();
    }
  });
});
