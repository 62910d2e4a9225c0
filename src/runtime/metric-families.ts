import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { STEER_LATENCY_BUCKETS } from './counters.ts';

/** The metric families of sessiond's Prometheus metrics (names, help, labels, buckets), one registry's. */
export interface MetricFamilies {
  readonly sessions: Gauge<'state'>;
  readonly attempts: Counter<'outcome' | 'category'>;
  readonly retries: Counter<'category'>;
  readonly turnDuration: Histogram<'status'>;
  readonly cancelLatency: Histogram;
  readonly steerLatency: Histogram;
  readonly queueJobs: Gauge<'state'>;
  readonly workers: Gauge;
  readonly approvalsWaiting: Gauge;
  readonly refreshErrors: Counter;
  readonly limitInUse: Gauge<'limit'>;
  readonly limitWaiting: Gauge<'limit'>;
  readonly tokens: Counter<'agent' | 'model' | 'kind'>;
  readonly quotaWalls: Counter<'attempts'>;
  readonly egressRefused: Counter<'reason'>;
  readonly whenBusy: Counter<'strategy' | 'effect'>;
  readonly scheduleFirings: Counter<'outcome'>;
  readonly parkedNextReset: Gauge;
  readonly webhookDeliveries: Counter<'outcome'>;
  readonly webhookDeadLetters: Gauge;
  readonly webhookOldestDue: Gauge;
}

/** Creates sessiond's metric families in `registry`. */
export function metricFamilies(registry: Registry): MetricFamilies {
  const registers = [registry];
  return {
    sessions: new Gauge({
      name: 'sessiond_sessions',
      help: 'Sessions by machine state (queued: first prompt not yet taken)',
      labelNames: ['state'],
      registers,
    }),
    attempts: new Counter({
      name: 'sessiond_attempts_total',
      help: 'Ended agent attempts by outcome (completed, failed, interrupted, cancelled) and failure category (none when not failed)',
      labelNames: ['outcome', 'category'],
      registers,
    }),
    retries: new Counter({
      name: 'sessiond_retries_total',
      help: 'Retries scheduled (a failed attempt followed by a backoff), by the failure category',
      labelNames: ['category'],
      registers,
    }),
    turnDuration: new Histogram({
      name: 'sessiond_turn_duration_seconds',
      help: 'Duration of ended turns, from the first attempt start to the final state, by final status',
      labelNames: ['status'],
      buckets: [0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600],
      registers,
    }),
    cancelLatency: new Histogram({
      name: 'sessiond_cancel_latency_seconds',
      help: 'From the session machine receiving a cancel to the turn being cancelled (the agent process tree gone)',
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 8, 13, 30],
      registers,
    }),
    steerLatency: new Histogram({
      name: 'sessiond_steer_latency_seconds',
      help: 'From a steer (whenBusy "steer") being accepted to the running turn having it (prompt.steered, native or restart); each counted at its bucket bound',
      buckets: [...STEER_LATENCY_BUCKETS],
      registers,
    }),
    queueJobs: new Gauge({
      name: 'sessiond_queue_jobs',
      help: 'BullMQ activation jobs by queue state',
      labelNames: ['state'],
      registers,
    }),
    workers: new Gauge({
      name: 'sessiond_workers',
      help: 'Workers whose heartbeat was seen recently',
      registers,
    }),
    limitInUse: new Gauge({
      name: 'sessiond_limit_in_use',
      help: 'Attempts holding a slot of each fleet limit (all its keys)',
      labelNames: ['limit'],
      registers,
    }),
    limitWaiting: new Gauge({
      name: 'sessiond_limit_waiting',
      help: 'Sessions waiting for each fleet limit (capacity, a cooldown or paused dispatch)',
      labelNames: ['limit'],
      registers,
    }),
    quotaWalls: new Counter({
      name: 'sessiond_quota_walls_total',
      help: 'Attempts that ended on a quota wall (a rate limit whose reset lies past maxRetryAfterMs: the session parked until it), by whether the attempt was counted against maxAttempts',
      labelNames: ['attempts'],
      registers,
    }),
    egressRefused: new Counter({
      name: 'sessiond_egress_refused_total',
      help: 'Requests of attempts their egress proxy refused (a host the policy does not list, a name resolving to a local address…), by reason; each is also an audit log line of the worker',
      labelNames: ['reason'],
      registers,
    }),
    whenBusy: new Counter({
      name: 'sessiond_prompts_when_busy_total',
      help: 'Prompts stored with a whenBusy strategy other than enqueue, by strategy and effect (interrupted: the running turn was asked to stop; steered: a pending steer of the running turn; queued: nothing ran to stop or steer); a rejected prompt writes nothing and is not counted',
      labelNames: ['strategy', 'effect'],
      registers,
    }),
    scheduleFirings: new Counter({
      name: 'sessiond_schedule_firings_total',
      help: "Schedules' firings, by outcome (enqueued, rejected_busy: whenBusy reject found the session busy, refused: the enqueue was refused, session_deleted: the schedule ended, failed)",
      labelNames: ['outcome'],
      registers,
    }),
    parkedNextReset: new Gauge({
      name: 'sessiond_parked_next_reset_timestamp_seconds',
      help: 'The earliest reset among the sessions parked at a quota wall (Unix time); 0 when none is parked',
      registers,
    }),
    approvalsWaiting: new Gauge({
      name: 'sessiond_approvals_waiting',
      help: 'Permission requests of agents waiting for an operator (approve / deny), fleet-wide',
      registers,
    }),
    tokens: new Counter({
      name: 'sessiond_tokens_total',
      help: 'Tokens the agents reported in their terminal messages, by agent, model and kind (input, output, cacheRead, cacheWrite)',
      labelNames: ['agent', 'model', 'kind'],
      registers,
    }),
    webhookDeliveries: new Counter({
      name: 'sessiond_webhook_deliveries_total',
      help: 'Webhook delivery attempts (one request to one endpoint) by outcome (delivered: 2xx, failed: retried, refused: a destination not allowed), and events by how they left (dead: dead-lettered, dropped: over maxPerSession), fleet-wide',
      labelNames: ['outcome'],
      registers,
    }),
    webhookDeadLetters: new Gauge({
      name: 'sessiond_webhook_dead_letters',
      help: 'Webhook dead letters kept (sessiond webhooks dead)',
      registers,
    }),
    webhookOldestDue: new Gauge({
      name: 'sessiond_webhook_lag_seconds',
      help: 'How long the longest-waiting session with webhook events due has waited past its due time (0: none overdue), fleet-wide',
      registers,
    }),
    refreshErrors: new Counter({
      name: 'sessiond_metrics_refresh_errors_total',
      help: 'Metric refreshes that failed (Redis unreachable…)',
      registers,
    }),
  };
}
