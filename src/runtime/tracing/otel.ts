import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Attributes,
  type Link,
} from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  RandomIdGenerator,
  type IdGenerator,
} from '@opentelemetry/sdk-trace-base';
import { attemptSpanId, type TurnTrace } from './trace-context.ts';
import type { AttemptSpan, Tracing, TurnSpan } from './tracing.ts';

/**
 * Makes the next span with the ids it is given (the stored turn trace's, an attempt's derived id),
 * random ones otherwise. The SDK asks for a span's ids synchronously in `startSpan`.
 */
class GivenIds implements IdGenerator {
  readonly #random = new RandomIdGenerator();
  nextTraceId: string | null = null;
  nextSpanId: string | null = null;

  generateTraceId(): string {
    const id = this.nextTraceId ?? this.#random.generateTraceId();
    this.nextTraceId = null;
    return id;
  }

  generateSpanId(): string {
    const id = this.nextSpanId ?? this.#random.generateSpanId();
    this.nextSpanId = null;
    return id;
  }
}

/** Loaded only when an OTLP endpoint is configured (see tracing.ts). The exporter reads the OTEL_EXPORTER_OTLP_* variables itself. */
export class OtelTracing implements Tracing {
  readonly #ids = new GivenIds();
  readonly #provider: BasicTracerProvider;
  readonly #tracer;

  constructor(serviceName: string) {
    this.#provider = new BasicTracerProvider({
      resource: resourceFromAttributes({ 'service.name': serviceName }),
      idGenerator: this.#ids,
      spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
    });
    this.#tracer = this.#provider.getTracer('sessiond');
  }

  attempt(turnTrace: TurnTrace, span: AttemptSpan): void {
    try {
      const parent = trace.setSpanContext(ROOT_CONTEXT, {
        traceId: turnTrace.traceId,
        spanId: turnTrace.spanId,
        traceFlags: TraceFlags.SAMPLED,
        isRemote: true,
      });
      const attributes: Attributes = {
        'sessiond.session_id': span.sessionId,
        'sessiond.turn': span.turn,
        'sessiond.attempt': span.attempt,
        'sessiond.agent': span.agent,
        'sessiond.model': span.model,
        'sessiond.worker': span.worker,
        'sessiond.outcome': span.outcome,
        ...(span.category === null ? {} : { 'sessiond.category': span.category }),
        ...(span.retryDelayMs === null ? {} : { 'sessiond.retry_delay_ms': span.retryDelayMs }),
        ...(span.tokens?.input === undefined ? {} : { 'gen_ai.usage.input_tokens': span.tokens.input }),
        ...(span.tokens?.output === undefined ? {} : { 'gen_ai.usage.output_tokens': span.tokens.output }),
      };
      // The previous attempt of the turn (perhaps on another worker) is what this one follows from.
      const links: Link[] =
        span.attempt > 1
          ? [
              {
                context: {
                  traceId: turnTrace.traceId,
                  spanId: attemptSpanId(turnTrace, span.attempt - 1),
                  traceFlags: TraceFlags.SAMPLED,
                },
                attributes: { 'sessiond.link': 'previous_attempt' },
              },
            ]
          : [];
      this.#ids.nextSpanId = attemptSpanId(turnTrace, span.attempt);
      const s = this.#tracer.startSpan(
        'sessiond.attempt',
        { kind: SpanKind.INTERNAL, startTime: span.startedAt, attributes, links },
        parent,
      );
      if (span.outcome === 'failed' || span.outcome === 'interrupted')
        s.setStatus({
          code: SpanStatusCode.ERROR,
          message: (span.errorText ?? span.category ?? span.outcome).slice(0, 500),
        });
      s.end(Math.max(span.startedAt, span.endedAt));
    } catch {
      // Tracing never breaks a session.
    }
  }

  turn(turnTrace: TurnTrace, span: TurnSpan): void {
    try {
      const attributes: Attributes = {
        'sessiond.session_id': span.sessionId,
        'sessiond.turn': span.turn,
        'sessiond.agent': span.agent,
        'sessiond.model': span.model,
        'sessiond.worker': span.worker,
        'sessiond.outcome': span.outcome,
        'sessiond.attempts': span.attempts,
        ...(span.category === null ? {} : { 'sessiond.category': span.category }),
      };
      this.#ids.nextTraceId = turnTrace.traceId;
      this.#ids.nextSpanId = turnTrace.spanId;
      const s = this.#tracer.startSpan(
        'sessiond.turn',
        { kind: SpanKind.INTERNAL, startTime: span.startedAt, attributes, root: true },
        ROOT_CONTEXT,
      );
      if (span.outcome === 'failed') s.setStatus({ code: SpanStatusCode.ERROR, message: span.category ?? 'failed' });
      s.end(Math.max(span.startedAt, span.endedAt));
    } catch {
      // Tracing never breaks a session.
    }
  }

  async shutdown(): Promise<void> {
    // Shutting down: spans that cannot be exported now are lost, and tracing never fails the worker.
    await this.#provider.shutdown().catch(() => undefined);
  }
}
