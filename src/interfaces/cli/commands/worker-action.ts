import { AGENT_NAMES } from '../../../agents/registry.ts';
import { agentHostOptions, attemptLimits, workspaceConfig } from '../../../config/config.ts';
import { clientSettingsOf } from '../../../config/client-settings.ts';
import { redactUrl } from '../../../runtime/redis/index.ts';
import { createSessionQueue } from '../../../runtime/queue.ts';
import { createKeys } from '../../../runtime/keys.ts';
import { SessionWorker } from '../../../runtime/worker.ts';
import { offeredAgents } from '../../../runtime/offered-agents.ts';
import { createLogger } from '../../log.ts';
import { openServerContext } from '../context.ts';
import { ExitCode } from '../exit-codes.ts';

export async function runWorker(flags: { concurrency?: number }): Promise<number> {
  const log = createLogger('sessiond-worker');
  const ctx = await openServerContext({ 'worker.concurrency': flags.concurrency });
  const { config } = ctx;
  const keys = createKeys(ctx.settings.prefix);
  const workspaces = workspaceConfig(config);
  const agentOptions = agentHostOptions(config, AGENT_NAMES);
  const worker = new SessionWorker({
    connect: ctx.connect,
    keys,
    queue: createSessionQueue(ctx.connect('worker-queue'), keys, {
      partitions: config.queue.partitions,
    }),
    ...(config.queue.consume === undefined ? {} : { consumePartitions: config.queue.consume }),
    waitReplicas: config.redis.waitReplicas,
    waitTimeoutMs: config.redis.waitTimeout,
    concurrency: config.worker.concurrency,
    leaseTtlMs: config.worker.leaseTtl,
    stalledIntervalMs: config.worker.stalledInterval,
    holdBackoffMs: config.worker.holdBackoff,
    pollMs: config.worker.poll,
    heartbeatMs: config.worker.heartbeat,
    agentOptions,
    agents: offeredAgents(config.worker.agents, agentOptions, 'worker.agents (SESSIOND_WORKER_AGENTS)'),
    policy: await ctx.policy(),
    limits: attemptLimits(config),
    retentionMs: config.lifecycle.retention,
    sweepIntervalMs: config.lifecycle.sweepInterval,
    maxLogMessages: config.lifecycle.maxLogMessages,
    maxLogBytes: config.lifecycle.maxLogBytes,
    fleetLimits: config.limits,
    webhooks: { webhooks: config.webhooks, delivery: config.webhookDelivery },
    // A schedule's firing is an enqueue: under the callers' lifecycle limits.
    callerLimits: clientSettingsOf(config).lifecycle,
    ...(workspaces === null ? {} : { workspaces }),
    log: (level, message, fields) => log[level](fields ?? {}, message),
  });
  await worker.start();
  log.info(
    {
      workerId: worker.id,
      redis: redactUrl(ctx.url),
      prefix: config.prefix,
      concurrency: config.worker.concurrency,
      partitions: worker.partitions,
      agents: worker.agents,
      // Where sessions' files live and where their snapshots go (a store URL's credentials are not shown).
      workspaces:
        workspaces === null
          ? 'off'
          : {
              root: workspaces.root,
              store: redactUrl(workspaces.store),
              exclude: workspaces.exclude,
              maxBytes: workspaces.maxBytes,
              maxSnapshots: workspaces.maxSnapshots,
              git: worker.git,
            },
    },
    'worker started',
  );
  process.stderr.write(
    `sessiond worker ${worker.id} started (concurrency ${config.worker.concurrency}); Ctrl+C to stop\n`,
  );
  await new Promise<void>((resolve) => {
    const stop = (signal: string): void => {
      log.info({ signal, graceMs: config.worker.shutdownGrace }, 'shutting down');
      resolve();
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  await worker.close(config.worker.shutdownGrace);
  await ctx.close();
  log.info({ workerId: worker.id }, 'worker stopped');
  return ExitCode.ok;
}
