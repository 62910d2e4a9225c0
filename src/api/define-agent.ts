import type { z } from 'zod';
import type { AgentDefinition } from '../agents/agent-definition.ts';
import type { PermissionKnobs } from '../policy/knobs.ts';
import { CliMessageSchema, type CliMessage } from '../protocol/index.ts';
import type { SteeringChannel } from '../agents/shared/steering.ts';

/** What one attempt of a custom agent gets. */
export interface AgentAttempt<Options> {
  /** The text to send: the prompt, or on a retry of an attempt that recorded it, a short continuation. */
  prompt: string;
  /** The caller's options for this turn, validated by the agent's `options` schema (plus `cwd`, which the deployment policy fills in). */
  options: Options & { cwd?: string };
  /** The agent session to continue (the `sessionId` of an earlier `session.started` of this session), or null: start a new one. */
  agentSessionId: string | null;
  /** Aborted when the attempt must stop (cancel, idle timeout, worker shutdown): stop, then return. */
  signal: AbortSignal;
  /**
   * With `steering: 'native'`: the steers sent to the running turn (whenBusy "steer"), oldest first, then new
   * ones; call `delivered(promptId)` once the agent has taken one into its turn. Absent otherwise.
   */
  steering?: SteeringChannel;
}

export interface AgentSpec<Schema extends z.ZodType<Record<string, unknown>>> {
  /** The name callers choose it by (`options.agent`); not a built-in agent's name nor `acp:…`. */
  name: string;
  /** What a caller may choose per session or turn; `cwd` and `idleTimeoutMs` are always allowed on top. */
  options: Schema;
  /**
   * One attempt. Contract: yields CliMessages and ends with exactly one terminal message
   * (`terminal.completed` or `terminal.failed` with a category); the session machine decides
   * whether a failed attempt is retried. A throw, or an end without a terminal message, is
   * recorded as `terminal.failed` (`process_crash`).
   */
  run(attempt: AgentAttempt<z.infer<Schema>>): AsyncIterable<CliMessage>;
  /** Its privileges, for the deployment policy (default: none to bound). */
  permissions?: PermissionKnobs;
  /**
   * `native`: `run` takes steers into its running turn itself (`attempt.steering`). Absent: a steer stops the
   * attempt at its next tool boundary (a `tool.completed` or `tool.failed` with no call open) and the agent runs
   * again, resuming its session, with the steer's text as the prompt.
   */
  steering?: 'native';
}

/** An agent made by defineAgent: give it to `createWorker({ agents })` (and `createClient({ agents })`). */
export interface DefinedAgent {
  readonly name: string;
  /** @internal the registry's shape of it. */
  readonly definition: AgentDefinition;
}

/**
 * Defines an agent of your own, without forking sessiond: the worker runs it like a built-in one
 * (retry, cancel, persistence, the message log and every surface are the same).
 *
 * @example
 * const echo = defineAgent({
 *   name: 'echo',
 *   options: z.object({ shout: z.boolean().optional() }),
 *   async *run({ prompt, options }) {
 *     yield { type: 'assistant', content: { text: options.shout ? prompt.toUpperCase() : prompt } };
 *     yield { type: 'terminal.completed', content: { stopReason: 'end' } };
 *   },
 * });
 */
export function defineAgent<Schema extends z.ZodType<Record<string, unknown>>>(spec: AgentSpec<Schema>): DefinedAgent {
  if (typeof spec.name !== 'string' || !/^[a-z0-9][a-z0-9._-]{0,63}$/.test(spec.name)) {
    throw new TypeError(
      `defineAgent: name must be 1-64 lowercase letters, digits or ._- (got ${JSON.stringify(spec.name)})`,
    );
  }
  const definition: AgentDefinition = {
    callerOptions: spec.options as unknown as AgentDefinition['callerOptions'],
    permissions: spec.permissions ?? {},
    ...(spec.steering === 'native' ? { steering: 'native' as const } : {}),
    run: (request, context) =>
      checkedMessages(
        spec.name,
        spec.run({
          prompt: request.text,
          options: request.options as z.infer<Schema> & { cwd?: string },
          agentSessionId: request.resumeSessionId,
          signal: context.signal ?? new AbortController().signal,
          ...(context.steering === undefined ? {} : { steering: context.steering }),
        }),
      ),
    // `sessiond normalize` of a custom agent's output: one CliMessage as JSON per line.
    createMapper() {
      const invalid: string[] = [];
      return {
        push(line: string): CliMessage[] {
          if (line.trim() === '') return [];
          try {
            return [CliMessageSchema.parse(JSON.parse(line))];
          } catch {
            // The line is kept as an invalid line (reported with the attempt), never thrown.
            invalid.push(line.slice(0, 500));
            return [];
          }
        },
        complete(exit) {
          if (exit.exitCode === 0 && invalid.length === 0)
            return [{ type: 'terminal.completed', content: { stopReason: 'end' } }];
          return [
            {
              type: 'terminal.failed',
              content: {
                text: `agent "${spec.name}" exited with ${exit.exitCode ?? exit.signal}`,
                category: invalid.length > 0 ? 'invalid_output' : 'process_crash',
                stderr: exit.stderrTail,
                invalid_output_lines: invalid,
              },
            },
          ];
        },
      };
    },
  };
  return Object.freeze({ name: spec.name, definition });
}

/**
 * A custom agent's messages as the contract says, checked one by one (its code may be plain
 * JavaScript): the first that does not parse ends the attempt `invalid_output`, naming the message
 * and the field, and is not stored; nothing after it is read.
 */
async function* checkedMessages(name: string, messages: AsyncIterable<CliMessage>): AsyncIterable<CliMessage> {
  let n = 0;
  for await (const message of messages) {
    n += 1;
    const parsed = CliMessageSchema.safeParse(message);
    if (parsed.success) {
      yield parsed.data;
      continue;
    }
    const issue = parsed.error.issues[0];
    const where = issue === undefined || issue.path.length === 0 ? '' : ` at ${issue.path.join('.')}`;
    const type =
      typeof (message as { type?: unknown })?.type === 'string' ? ` (${(message as { type: string }).type})` : '';
    let shown: string;
    try {
      shown = JSON.stringify(message)?.slice(0, 500) ?? String(message);
    } catch {
      // A value JSON cannot show (a cycle, a BigInt): its string form is enough to find it.
      shown = String(message);
    }
    yield {
      type: 'terminal.failed',
      content: {
        text: `agent "${name}" yielded an invalid message #${n}${type}${where}: ${issue?.message ?? 'not a message'}`,
        category: 'invalid_output',
        stderr: '',
        invalid_output_lines: [shown],
      },
    };
    return;
  }
}
