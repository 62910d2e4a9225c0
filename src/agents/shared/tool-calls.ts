import type { CliMessage } from '../../protocol/index.ts';

/**
 * One `tool.call` per toolCallId, `tool.update` only when arguments or progress
 * change, and exactly one `tool.completed` / `tool.failed` per toolCallId,
 * however many times the agent reports the result.
 */
export class ToolCalls {
  readonly #calls = new Map<
    string,
    { name: string; args: string; argsValue: unknown; progress: string; resolved: boolean }
  >();

  /** The call as seen now (its arguments may still be streaming). */
  seen(toolCallId: string, name: string, args: unknown): CliMessage[] {
    const known = this.#calls.get(toolCallId);
    const argsJson = stableJson(args);
    if (known === undefined) {
      this.#calls.set(toolCallId, { name, args: argsJson, argsValue: args ?? {}, progress: '', resolved: false });
      return [{ type: 'tool.call', content: { toolCallId, name, arguments: args ?? {} } }];
    }
    if (known.resolved || known.args === argsJson) return [];
    known.args = argsJson;
    known.argsValue = args ?? {};
    return [{ type: 'tool.update', content: { toolCallId, name: known.name, arguments: args ?? {} } }];
  }

  progress(toolCallId: string, name: string, args: unknown, partialResult: unknown): CliMessage[] {
    const out = this.seen(toolCallId, name, args);
    const known = this.#calls.get(toolCallId);
    if (known === undefined || known.resolved) return out;
    const progressJson = stableJson(partialResult);
    if (progressJson === known.progress) return out;
    known.progress = progressJson;
    out.push({
      type: 'tool.update',
      content: { toolCallId, name: known.name, arguments: known.argsValue, partialResult },
    });
    return out;
  }

  result(toolCallId: string, name: string, isError: boolean, result: unknown): CliMessage[] {
    const known = this.#calls.get(toolCallId);
    if (known?.resolved) return [];
    const out = known === undefined ? this.seen(toolCallId, name, {}) : [];
    const entry = this.#calls.get(toolCallId);
    if (entry === undefined) return out;
    entry.resolved = true;
    out.push(
      isError
        ? { type: 'tool.failed', content: { toolCallId, name: entry.name, error: result } }
        : { type: 'tool.completed', content: { toolCallId, name: entry.name, result } },
    );
    return out;
  }

  /** Every call still without a result gets one, as failed: the run ended first. */
  unresolved(reason: string): CliMessage[] {
    const out: CliMessage[] = [];
    for (const [toolCallId, call] of this.#calls) {
      if (call.resolved) continue;
      call.resolved = true;
      out.push({ type: 'tool.failed', content: { toolCallId, name: call.name, error: reason } });
    }
    return out;
  }
}

function stableJson(value: unknown): string {
  try {
    return JSON.stringify(value ?? {}) ?? '';
  } catch {
    // A value JSON cannot write (a cycle, a BigInt) is still shown, as text.
    return String(value);
  }
}
