import { createHash, randomBytes } from 'node:crypto';

/**
 * A turn's trace context, stored durably with the session (its meta's `trace` field, written by the
 * fenced write before the turn's first attempt starts): every worker that runs an attempt of the
 * turn — the next one after a crash too — puts its spans in this trace, under this turn span.
 */
export interface TurnTrace {
  version: 1;
  turn: number;
  /** 32 lowercase hex digits. */
  traceId: string;
  /** The turn span's id: 16 lowercase hex digits. */
  spanId: string;
}

const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;

function nonZero(hex: string): boolean {
  return /[1-9a-f]/.test(hex);
}

export function newTurnTrace(turn: number): TurnTrace {
  let traceId = randomBytes(16).toString('hex');
  let spanId = randomBytes(8).toString('hex');
  // All zeros is invalid in W3C trace context (one chance in 2^128 / 2^64).
  if (!nonZero(traceId)) traceId = `${traceId.slice(0, 31)}1`;
  if (!nonZero(spanId)) spanId = `${spanId.slice(0, 15)}1`;
  return { version: 1, turn, traceId, spanId };
}

/** The stored trace of `turn`, or null (none stored, another turn's, or not one we wrote). */
export function parseTurnTrace(raw: string | undefined, turn: number): TurnTrace | null {
  if (raw === undefined || raw === '') return null;
  try {
    const value = JSON.parse(raw) as Partial<TurnTrace>;
    if (value.version !== 1 || value.turn !== turn) return null;
    if (typeof value.traceId !== 'string' || !HEX32.test(value.traceId) || !nonZero(value.traceId)) return null;
    if (typeof value.spanId !== 'string' || !HEX16.test(value.spanId) || !nonZero(value.spanId)) return null;
    return { version: 1, turn, traceId: value.traceId, spanId: value.spanId };
  } catch {
    // An unreadable trace context starts a new trace.
    return null;
  }
}

/** An attempt's span id, derived from its turn's trace: any worker finds the same one (the interrupted attempt's span too). */
export function attemptSpanId(trace: TurnTrace, attempt: number): string {
  const id = createHash('sha256').update(`${trace.traceId}/${trace.spanId}/${attempt}`).digest('hex').slice(0, 16);
  return nonZero(id) ? id : `${id.slice(0, 15)}1`;
}

/** The W3C `traceparent` of an attempt (sampled): what the agent's process gets as `TRACEPARENT`. */
export function attemptTraceparent(trace: TurnTrace, attempt: number): string {
  return `00-${trace.traceId}-${attemptSpanId(trace, attempt)}-01`;
}
