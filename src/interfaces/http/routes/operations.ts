import { exportChart } from '../../../../machines/definition.ts';
import { sessionMachine } from '../../../../machines/session.machine.ts';
import { json, ref } from '../route.ts';
import { defineRoute } from './context.ts';
import { isLive } from '../../../runtime/worker-liveness.ts';
import { whenBusyOffered } from '../../../runtime/caller/enqueue.ts';
import { WHEN_BUSY } from '../../../policy/index.ts';
import { withTimeout } from '../../with-timeout.ts';

/** Health, readiness, metrics, the OpenAPI document, the statechart and the deployment policy. */
export const operationRoutes = [
  defineRoute({
    method: 'get',
    path: '/healthz',
    operationId: 'health',
    tags: ['operations'],
    summary: 'The process is up',
    scope: 'public',
    responses: { '200': json({ type: 'object', properties: { status: { const: 'ok' } } }, 'up') },
    handler: (c) => c.json({ status: 'ok' }),
  }),
  defineRoute({
    method: 'get',
    path: '/readyz',
    operationId: 'ready',
    tags: ['operations'],
    summary: 'Redis answers PING and a worker heartbeat was seen recently',
    scope: 'public',
    responses: {
      '200': json(
        {
          type: 'object',
          required: ['status'],
          description: '`workers`, `containment` and `sandbox` only with a credential, when a token is configured',
          properties: {
            status: { const: 'ready' },
            workers: { type: 'integer' },
            containment: {
              type: 'array',
              description:
                'per live worker: `cgroup` (a cgroup per attempt, killed whole) or `sweep` (marker, group and parent links only), with the detail',
              items: { type: 'object' },
            },
            sandbox: {
              type: 'array',
              description:
                'per live worker: its sandbox mode (`bwrap`, `landlock` or `none`), the detail, `gaps` (what the mode cannot stop) and `refused` (the mode asked for is unavailable: attempts fail); see docs/sandbox.md',
              items: { type: 'object' },
            },
          },
        },
        'ready',
      ),
      '503': json(
        {
          type: 'object',
          required: ['status', 'reason'],
          properties: { status: { const: 'unready' }, reason: { type: 'string' } },
        },
        'not ready, with the reason',
      ),
    },
    async handler(c, _input, { client, auth, workerStaleMs }) {
      const ping = await withTimeout(client.deployment.ping(), 1000).then(
        (r) => (r === null ? 'Redis did not answer PING within 1 s' : null),
        (error: Error) => `Redis PING failed: ${error.message}`,
      );
      // Without a credential (when one is configured): ready or not, no details.
      if (auth.principalOf(c) === null) {
        const ready =
          ping === null && (await client.deployment.workers()).some((w) => isLive(w, Date.now(), workerStaleMs));
        return c.json({ status: ready ? 'ready' : 'unready' }, ready ? 200 : 503);
      }
      if (ping !== null) return c.json({ status: 'unready', reason: ping }, 503);
      const now = Date.now();
      const workers = await client.deployment.workers();
      const live = workers.filter((w) => isLive(w, now, workerStaleMs));
      if (live.length === 0) {
        const last = Math.max(0, ...workers.map((w) => w.lastSeen));
        const reason =
          workers.length === 0
            ? 'no worker has ever sent a heartbeat'
            : `no worker heartbeat in the last ${workerStaleMs} ms (last ${now - last} ms ago)`;
        return c.json({ status: 'unready', reason, workers: 0 }, 503);
      }
      // Each live worker's containment: a host without cgroups is said here, not only in its log.
      const containment = live.map((w) => ({
        worker: w.id,
        mode: w.containment?.mode ?? 'sweep',
        detail: w.containment?.detail ?? 'worker predates containment reports',
      }));
      // And each one's sandbox, with what its mode cannot stop.
      const sandbox = live.map((w) => ({
        worker: w.id,
        ...(w.sandbox ?? { mode: 'none', detail: 'worker predates sandbox reports', gaps: [], refused: false }),
      }));
      return c.json({ status: 'ready', workers: live.length, containment, sandbox });
    },
  }),
  defineRoute({
    method: 'get',
    path: '/api/workers',
    operationId: 'listWorkers',
    tags: ['operations'],
    summary:
      "The workers' latest heartbeats, each with `live` (seen within `staleAfterMs`, as `/readyz` counts them) and what it offers",
    scope: 'read',
    responses: {
      '200': json(
        {
          type: 'object',
          required: ['workers', 'live', 'staleAfterMs'],
          properties: {
            live: { type: 'integer', description: 'how many workers are live' },
            staleAfterMs: { type: 'integer', description: 'a heartbeat older than this is a dead worker' },
            workers: {
              type: 'array',
              description:
                'newest heartbeat first: `id`, `host`, `pid`, `lastSeen` (epoch ms), `live`, `active` attempts, and, from workers that report them, `concurrency`, `agents`, `partitions`, `containment`, `sandbox`',
              items: {
                type: 'object',
                required: ['id', 'host', 'pid', 'lastSeen', 'live', 'active'],
                properties: {
                  id: { type: 'string' },
                  host: { type: 'string' },
                  pid: { type: 'integer' },
                  lastSeen: { type: 'integer' },
                  live: { type: 'boolean' },
                  active: { type: 'integer' },
                  concurrency: { type: 'integer' },
                  agents: { type: 'array', items: { type: 'string' } },
                  partitions: { type: 'array', items: { type: 'integer' } },
                },
              },
            },
          },
        },
        'the workers',
      ),
    },
    async handler(c, _input, { client, workerStaleMs }) {
      const now = Date.now();
      const workers = (await client.deployment.workers())
        .map((w) => ({ ...w, live: isLive(w, now, workerStaleMs) }))
        .sort((a, b) => b.lastSeen - a.lastSeen);
      return c.json({ workers, live: workers.filter((w) => w.live).length, staleAfterMs: workerStaleMs });
    },
  }),
  defineRoute({
    method: 'get',
    path: '/metrics',
    operationId: 'metrics',
    tags: ['operations'],
    summary: 'Prometheus metrics (text format)',
    scope: 'read',
    responses: { '200': { description: 'the metrics', content: { 'text/plain': { schema: { type: 'string' } } } } },
    async handler(c, _input, { metrics }) {
      const text = await metrics.render();
      return c.body(text, 200, { 'Content-Type': metrics.contentType });
    },
  }),
  defineRoute({
    method: 'get',
    path: '/openapi.json',
    operationId: 'openapi',
    tags: ['operations'],
    summary: 'This document',
    scope: 'read',
    responses: { '200': json({ type: 'object' }, 'the OpenAPI document') },
    handler: (c, _input, { document }) => c.json(document),
  }),
  defineRoute({
    method: 'get',
    path: '/api/chart',
    operationId: 'getChart',
    tags: ['sessions'],
    summary: "The session machine's states and transitions",
    scope: 'read',
    responses: { '200': json(ref('Chart'), 'the statechart') },
    handler: (c) => c.json(exportChart(sessionMachine)),
  }),
  defineRoute({
    method: 'get',
    path: '/api/deployment-policy',
    operationId: 'getDeploymentPolicy',
    tags: ['sessions'],
    summary:
      "What callers of this deployment may choose: agents, cwd and agentDir roots, maximum idle timeout and prompt size, each agent's permission ceiling, allowed lists and switches, and the `whenBusy` strategies offered (`whenBusyOffered`: built and allowed)",
    scope: 'read',
    responses: {
      '200': json(
        {
          type: 'object',
          required: [
            'agents',
            'workspace',
            'workspaceRoots',
            'agentDirRoots',
            'maxIdleTimeoutMs',
            'maxPromptChars',
            'permissions',
            'approvals',
            'whenBusyOffered',
          ],
          properties: {
            whenBusyOffered: {
              type: 'array',
              items: { type: 'string', enum: [...WHEN_BUSY] },
              description:
                'The `whenBusy` strategies a prompt may use here: those this version of sessiond carries out and the policy allows (`whenBusy`), in order',
            },
          },
        },
        'the deployment policy',
      ),
    },
    handler: async (c, _input, { client }) => {
      const policy = await client.deployment.policy();
      return c.json({ ...policy, whenBusyOffered: whenBusyOffered(policy) });
    },
  }),
];
