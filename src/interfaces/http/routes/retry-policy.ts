import { SESSION_ID_PATTERN } from '../../../runtime/keys.ts';
import { readJson } from '../body.ts';
import type { RouteContext } from './context.ts';
import { policyError, unknown } from './views.ts';

/** The global retry policy and each session's override. */
export function registerRetryPolicyRoutes(ctx: RouteContext): void {
  const { app, runtime } = ctx;
  app.get('/api/retry-policy', async (c) => c.json(await runtime.getPolicy()));
  app.put('/api/retry-policy', async (c) => {
    const result = await runtime.setPolicy(await readJson(c));
    if (!result.ok) throw policyError(result.errors);
    return c.json({ policy: result.policy, source: 'global' });
  });
  app.delete('/api/retry-policy', async (c) => c.json({ policy: await runtime.resetPolicy(), source: 'default' }));
  app.get('/api/sessions/:id/retry-policy', async (c) => {
    const id = c.req.param('id');
    if (!SESSION_ID_PATTERN.test(id)) throw unknown(id);
    return c.json(await runtime.getPolicy(id));
  });
  app.put('/api/sessions/:id/retry-policy', async (c) => {
    const id = c.req.param('id');
    const patch = await readJson(c);
    if (!SESSION_ID_PATTERN.test(id)) throw unknown(id);
    const result = await runtime.setPolicy(patch, id);
    if (!result.ok) throw policyError(result.errors);
    return c.json({ policy: result.policy, source: 'session' });
  });
  app.delete('/api/sessions/:id/retry-policy', async (c) => {
    const id = c.req.param('id');
    if (!SESSION_ID_PATTERN.test(id)) throw unknown(id);
    const policy = await runtime.resetPolicy(id);
    return c.json({ policy, source: (await runtime.getPolicy(id)).source });
  });
}
