/**
 * Traces of turns and attempts (OpenTelemetry, exported over OTLP/HTTP). Off unless
 * `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set: then the SDK is
 * loaded (otel.ts, imported only then); otherwise nothing of it is loaded and no span is made.
 *
 * Spans are made when what they describe has ended, from what the session machine recorded (start
 * and end times, outcome, category, retry delay), by whichever worker sees it end: the turn span
 * and the attempt spans carry the ids of the turn's stored trace (trace-context.ts), so a turn that
 * moves to another worker after a crash stays one trace, and the interrupted attempt's span is
 * made by the worker that records it interrupted.
 */
export interface AttemptSpan {
  sessionId: string;
  turn: number;
  attempt: number;
  agent: string;
  model: string;
  worker: string;
  outcome: string;
  category: string | null;
  errorText: string | null;
  /** The backoff before the next attempt, when one was scheduled. */
  retryDelayMs: number | null;
  startedAt: number;
  endedAt: number;
  tokens: { input?: number; output?: number; cacheRead?: number; cacheWrite?: number } | null;
}

export interface TurnSpan {
  sessionId: string;
  turn: number;
  agent: string;
  model: string;
  worker: string;
  /** completed, failed or cancelled. */
  outcome: string;
  /** The turn's failure reason (e.g. attempts_exhausted) or its last attempt's category. */
  category: string | null;
  attempts: number;
  startedAt: number;
  endedAt: number;
}

/** Contract: never throws; export failures are the SDK's (logged by its diag, never the session's). */
export interface Tracing {
  attempt(trace: import('./trace-context.ts').TurnTrace, span: AttemptSpan): void;
  turn(trace: import('./trace-context.ts').TurnTrace, span: TurnSpan): void;
  /** Exports what is buffered and stops. */
  shutdown(): Promise<void>;
}

/** Whether the environment asks for traces (an OTLP endpoint is set). */
export function tracingWanted(env: NodeJS.ProcessEnv = process.env): boolean {
  return (env.OTEL_EXPORTER_OTLP_ENDPOINT ?? '') !== '' || (env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? '') !== '';
}

/** The tracing of this process: null (no SDK loaded) unless an OTLP endpoint is set. */
export async function createTracing(
  options: { serviceName?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<Tracing | null> {
  if (!tracingWanted(options.env)) return null;
  // The core's one dynamic import: the OpenTelemetry SDK is optional (several packages, loaded only
  // by a process that exports traces), so nothing of it is loaded without an OTLP endpoint.
  const { OtelTracing } = await import('./otel.ts');
  return new OtelTracing(options.serviceName ?? 'sessiond');
}
