import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  attemptSpanId,
  attemptTraceparent,
  newTurnTrace,
  parseTurnTrace,
} from '../../../src/runtime/tracing/trace-context.ts';
import { createTracing, tracingWanted } from '../../../src/runtime/tracing/tracing.ts';

const SRC = fileURLToPath(new URL('../../../src/', import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? sources(path) : /\.(ts|js|mjs)$/.test(name) ? [path] : [];
  });
}

describe('a turn’s trace context', () => {
  it('is stored and read back for its own turn only; anything else is refused', () => {
    const trace = newTurnTrace(3);
    expect(trace.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(trace.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(parseTurnTrace(JSON.stringify(trace), 3)).toEqual(trace);
    expect(parseTurnTrace(JSON.stringify(trace), 4)).toBeNull();
    expect(parseTurnTrace(JSON.stringify({ ...trace, traceId: '0'.repeat(32) }), 3)).toBeNull();
    expect(parseTurnTrace(JSON.stringify({ ...trace, spanId: 'XYZ' }), 3)).toBeNull();
    expect(parseTurnTrace('not json', 3)).toBeNull();
    expect(parseTurnTrace(undefined, 3)).toBeNull();
  });

  it('gives every worker the same span id for an attempt, a different one per attempt, in a W3C traceparent', () => {
    const trace = newTurnTrace(1);
    const again = parseTurnTrace(JSON.stringify(trace), 1);
    if (again === null) throw new Error('not read back');
    expect(attemptSpanId(again, 2)).toBe(attemptSpanId(trace, 2));
    expect(attemptSpanId(trace, 1)).not.toBe(attemptSpanId(trace, 2));
    expect(attemptSpanId(trace, 1)).not.toBe(trace.spanId);
    expect(attemptTraceparent(trace, 1)).toBe(`00-${trace.traceId}-${attemptSpanId(trace, 1)}-01`);
  });
});

describe('tracing off', () => {
  it('without an OTLP endpoint there is no tracing, and the SDK is only ever imported lazily by tracing.ts', async () => {
    expect(tracingWanted({})).toBe(false);
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' })).toBe(true);
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:4318/v1/traces' })).toBe(true);
    expect(await createTracing({ env: {} })).toBeNull();
    // Statically: only otel.ts imports OpenTelemetry, and otel.ts is reached only by a dynamic import.
    const importers = sources(SRC).filter((f) => /from '@opentelemetry\//.test(readFileSync(f, 'utf8')));
    expect(importers.map((f) => relative(SRC, f))).toEqual(['runtime/tracing/otel.ts']);
    const reaching = sources(SRC).filter((f) => /['"]\.{1,2}\/(?:[\w-]+\/)*otel\.ts['"]/.test(readFileSync(f, 'utf8')));
    expect(reaching.map((f) => relative(SRC, f))).toEqual(['runtime/tracing/tracing.ts']);
    expect(readFileSync(join(SRC, 'runtime/tracing/tracing.ts'), 'utf8')).toMatch(/await import\('\.\/otel\.ts'\)/);
    expect(readFileSync(join(SRC, 'runtime/tracing/tracing.ts'), 'utf8')).not.toMatch(/^import [^t].*otel\.ts/m);
  });
});
