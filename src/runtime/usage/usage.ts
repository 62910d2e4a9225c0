import type { Usage } from '../../protocol/index.ts';

/**
 * Token usage, as every `terminal.completed` message carries it, summed per attempt, turn and
 * session. Counted in the session's own meta by the fenced write that stores the terminal message
 * (COUNT_USAGE in usage-script.ts), so a batch sent again or a replayed turn never counts twice.
 */

/** The kinds of tokens counted (the `kind` label of `sessiond_tokens_total`) — the contract's Usage fields. */
export const TOKEN_KINDS = ['input', 'output', 'cacheRead', 'cacheWrite'] as const;
export type TokenKind = (typeof TOKEN_KINDS)[number];

/** Sums of the contract's usage fields (absent: never reported). */
export type UsageTotals = Partial<Record<TokenKind | 'totalTokens' | 'cost', number>>;

/** One attempt's usage, written with its terminal message. */
export interface UsageRecord {
  turn: number;
  attempt: number;
  agent: string;
  /** The model the attempt ran with (the host's pinned one, else the caller's); `default`: the agent's own default. */
  model: string;
  usage: UsageTotals;
  at: number;
}

/** The session's usage as stored in its meta (`usage`, `usageTurn`, `usageByModel`). */
export interface SessionUsage {
  total: UsageTotals;
  /** The latest turn that reported usage: its sum and each attempt's. */
  turn: {
    index: number;
    total: UsageTotals;
    attempts: Array<{ attempt: number; usage: UsageTotals; at: number; agent: string; model: string }>;
  } | null;
  /** Per `agent` and `model` (at most MAX_MODELS pairs; further ones are summed under `other`/`other`). */
  byModel: Array<{ agent: string; model: string; usage: UsageTotals }>;
}

/** Distinct agent/model pairs a session's usage keeps apart (nothing grows without bound). */
export const MAX_MODELS = 50;

const FIELDS = [...TOKEN_KINDS, 'totalTokens', 'cost'] as const;

/** The finite, non-negative fields of a terminal message's usage (anything else is dropped). */
export function usageTotals(usage: Usage | undefined): UsageTotals | null {
  if (usage === undefined) return null;
  const out: UsageTotals = {};
  for (const field of FIELDS) {
    const value = usage[field];
    if (typeof value === 'number' && Number.isFinite(value) && value >= 0) out[field] = value;
  }
  return Object.keys(out).length === 0 ? null : out;
}

/** Tokens an attempt used, for `maxTokensPerMinute`: its `totalTokens`, else input + output + cache reads and writes. */
export function tokenCount(usage: UsageTotals): number {
  if (usage.totalTokens !== undefined) return usage.totalTokens;
  return TOKEN_KINDS.reduce((sum, kind) => sum + (usage[kind] ?? 0), 0);
}

function parse(raw: string | undefined): unknown {
  if (raw === undefined || raw === '') return null;
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    // Not JSON: no usage recorded.
    return null;
  }
}

function totalsOf(value: unknown): UsageTotals {
  const out: UsageTotals = {};
  if (value === null || typeof value !== 'object') return out;
  for (const field of FIELDS) {
    const n = (value as Record<string, unknown>)[field];
    if (typeof n === 'number' && Number.isFinite(n)) out[field] = n;
  }
  return out;
}

/** Reads the usage fields of a session's meta; null when it never reported any. */
export function sessionUsage(meta: Readonly<Record<string, string>>): SessionUsage | null {
  const total = parse(meta.usage);
  if (total === null) return null;
  const turnRaw = parse(meta.usageTurn) as {
    turn?: unknown;
    total?: unknown;
    attempts?: Record<string, unknown>;
  } | null;
  let turn: SessionUsage['turn'] = null;
  if (turnRaw !== null && typeof turnRaw.turn === 'number') {
    const attempts = Object.entries(turnRaw.attempts ?? {})
      .map(([attempt, value]) => {
        const v = (value ?? {}) as { at?: unknown; agent?: unknown; model?: unknown };
        return {
          attempt: Number(attempt),
          usage: totalsOf(value),
          at: Number(v.at ?? 0),
          agent: String(v.agent ?? ''),
          model: String(v.model ?? ''),
        };
      })
      .filter((a) => Number.isInteger(a.attempt))
      .sort((a, b) => a.attempt - b.attempt);
    turn = { index: turnRaw.turn, total: totalsOf(turnRaw.total), attempts };
  }
  const models = parse(meta.usageByModel);
  const byModel: SessionUsage['byModel'] = [];
  if (models !== null && typeof models === 'object') {
    for (const [key, value] of Object.entries(models as Record<string, unknown>)) {
      const [agent = '', model = ''] = key.split('\t');
      byModel.push({ agent, model, usage: totalsOf(value) });
    }
  }
  return { total: totalsOf(total), turn, byModel };
}

/** `12 in / 3 out / 100 cache read` — the tokens that were reported (cache and cost only when not 0), for the CLI. */
export function formatUsage(usage: UsageTotals): string {
  const parts: string[] = [];
  if (usage.input !== undefined) parts.push(`${usage.input} in`);
  if (usage.output !== undefined) parts.push(`${usage.output} out`);
  if (usage.cacheRead) parts.push(`${usage.cacheRead} cache read`);
  if (usage.cacheWrite) parts.push(`${usage.cacheWrite} cache write`);
  if (usage.cost) parts.push(`cost ${Math.round(usage.cost * 1e6) / 1e6}`);
  return parts.length === 0 ? 'none reported' : parts.join(' / ');
}
