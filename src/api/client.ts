import type { Redis } from 'ioredis';
import type { PolicyInput } from '../policy/index.ts';
import type { RetryPolicy, RetryPolicyResult } from '../retry/index.ts';
import type { LifecycleLimits } from '../runtime/lifecycle/limits.ts';
import type { ListPage } from '../runtime/lifecycle/listing.ts';
import { createRedis } from '../runtime/redis/connection.ts';
import { Runtime, type EnqueueRequest, type SessionView } from '../runtime/runtime.ts';
import type { DefinedAgent } from './define-agent.ts';
import type { SessionState, StoredMessage } from './types.ts';
import { watchSession, type WatchOptions } from './watch.ts';
import { registerAgent } from '../agents/registry.ts';
import { deploymentPolicy } from '../runtime/deployment-policy.ts';

/** Where Redis is: a URL (`redis://…`, `rediss://…`), or a function making a new connection (sessiond opens several). */
export type RedisOption = string | ((role: string) => Redis);

export interface ClientOptions {
  redis: RedisOption;
  /** The key prefix shared with the workers. @default 'sessiond' */
  prefix?: string;
  /** Agents of your own (defineAgent) that callers may choose; the workers need them too. */
  agents?: readonly DefinedAgent[];
  /** The deployment policy requests are checked against (as `policy` in the config file). @default every agent, `workspace` the process's cwd */
  policy?: PolicyInput;
  /** The workspace: a session's cwd when its caller names none, and the default allowed root. @default process.cwd() */
  workspace?: string;
  /** Retention and quotas (see README "Data lifecycle"). */
  limits?: Partial<LifecycleLimits>;
}

/** The sessiond client: everything a caller does, against the Redis the workers use. */
export interface Client {
  /** Adds a prompt to a session (created unless it exists) and makes sure a worker runs it. */
  enqueue(request: EnqueueRequest): Promise<{ sessionId: string; turn: number; created: boolean }>;
  /** Adds a prompt to an existing session (NotFoundError otherwise). */
  prompt(sessionId: string, request: Omit<EnqueueRequest, 'sessionId' | 'retryPolicy' | 'retention'>): Promise<{ sessionId: string; turn: number }>;
  /** The session's stored messages from `from`, then live ones; ends with the latest turn unless `follow`. */
  watch(sessionId: string, options?: WatchOptions): AsyncIterable<StoredMessage>;
  /** A page of the message log (no waiting). */
  messages(sessionId: string, options?: { from?: number; limit?: number }): Promise<StoredMessage[]>;
  /** The session's state, latest turn, attempts, history, …; null for an unknown id. */
  inspect(sessionId: string): Promise<SessionView | null>;
  /** Sessions newest first; `next` is the cursor of the next page (null on the last). */
  list(options?: { state?: SessionState; cursor?: string; limit?: number }): Promise<ListPage>;
  /** Cancels the current turn wherever it runs (NotFoundError for an unknown id). */
  cancel(sessionId: string, reason?: string): Promise<{ delivered: 'worker' | 'activation' }>;
  /** Resumes a session parked at a quota wall now, before the provider's reset (ConflictError when it is not parked). */
  resume(sessionId: string): Promise<{ sessionId: string; turn: number; parkedUntil: number; delivered: 'worker' | 'activation' }>;
  /** Deletes a session fleet-wide: a finished one, or with `force` a running one (its turn cancelled first). */
  delete(
    sessionId: string,
    options?: { force?: boolean; /** Who asks, for the deletion audit log (e.g. `app:alice`). */ actor?: string },
  ): Promise<{ sessionId: string; deleted: boolean; cancelled: boolean }>;
  /** The session as a versioned JSON-lines archive. */
  export(sessionId: string): Promise<string>;
  /** Restores an archive (as `as`, default its own id). */
  /** Under a new id (`as`), the copy gets an agent conversation of its own: `conversation` says whether it continues the original's (`forked`) or starts anew (`new`). */
  import(archive: string, options?: { as?: string }): Promise<{ sessionId: string; messages: number; state: string; conversation: 'kept' | 'forked' | 'new' }>;
  retryPolicy: {
    /** The policy in force: the session's own, else the global one, else the defaults. */
    get(options?: { sessionId?: string }): Promise<{ policy: RetryPolicy; source: 'session' | 'global' | 'default' }>;
    /** Validates `patch` over the policy in force; `{ ok: false, errors }` changes nothing. */
    set(patch: Partial<RetryPolicy>, options?: { sessionId?: string }): Promise<RetryPolicyResult>;
    /** Back to the defaults (global), or to following the global one (a session). */
    reset(options?: { sessionId?: string }): Promise<RetryPolicy>;
  };
  /** Closes every connection this client opened. */
  close(): Promise<void>;
}

/** A connection factory from the option; the connections it makes are closed by `closeAll`. */
export function connections(redis: RedisOption): { connect: (role: string) => Redis; closeAll: () => void } {
  const made = new Set<Redis>();
  const connect = (role: string): Redis => {
    const connection = typeof redis === 'string' ? createRedis(redis, { role, maxRetriesPerRequest: null }) : redis(role);
    made.add(connection);
    connection.once('end', () => made.delete(connection));
    return connection;
  };
  return { connect, closeAll: () => made.forEach((c) => c.disconnect()) };
}

/** A Runtime for library callers: the agents registered and the policy resolved on first enqueue (a read loads neither). */
export function openRuntime(options: ClientOptions, connect: (role: string) => Redis): Runtime {
  return new Runtime({
    connect,
    ...(options.prefix === undefined ? {} : { prefix: options.prefix }),
    ...(options.limits === undefined ? {} : { limits: options.limits }),
    policy: async () => {
      for (const agent of options.agents ?? []) registerAgent(agent.name, agent.definition);
      return deploymentPolicy({
        ...(options.policy === undefined ? {} : { policy: options.policy }),
        ...(options.workspace === undefined ? {} : { workspace: options.workspace }),
      });
    },
  });
}

/** The client over a Runtime (the CLI passes its own, configured from the environment). */
export function clientOf(runtime: Runtime, onClose: () => void | Promise<void> = () => undefined): Client {
  return {
    enqueue: (request) => runtime.enqueue(request),
    prompt: async (sessionId, request) => {
      const { turn } = await runtime.enqueue({ ...request, sessionId }, { mustExist: true });
      return { sessionId, turn };
    },
    // The log holds what the agents yielded, CliMessages (typed at the agent boundary).
    watch: (sessionId, options) => watchSession(runtime, sessionId, options) as AsyncIterable<StoredMessage>,
    messages: async (sessionId, options = {}) => (await runtime.readMessages(sessionId, options.from ?? 1, options.limit ?? 1000)) as StoredMessage[],
    inspect: (sessionId) => runtime.getSession(sessionId),
    list: (options = {}) => runtime.listPage(options),
    cancel: (sessionId, reason) => runtime.cancel(sessionId, reason),
    resume: (sessionId) => runtime.resumeParked(sessionId),
    delete: (sessionId, options = {}) => runtime.deleteSession(sessionId, options),
    export: (sessionId) => runtime.exportSession(sessionId),
    import: (archive, options) => runtime.importSession(archive, options),
    retryPolicy: {
      get: (options = {}) => runtime.getPolicy(options.sessionId),
      set: (patch, options = {}) => runtime.setPolicy(patch, options.sessionId),
      reset: (options = {}) => runtime.resetPolicy(options.sessionId),
    },
    async close() {
      await runtime.close();
      await onClose();
    },
  };
}

/**
 * A client of a sessiond deployment: enqueue prompts, watch their messages, inspect, list,
 * cancel, delete, export/import sessions, configure the retry policy. Connects lazily.
 *
 * Contract: input is validated first and refused with an InputError naming the field, with
 * nothing written; an unknown session is a NotFoundError (`inspect` returns null instead).
 */
export function createClient(options: ClientOptions): Client {
  const { connect, closeAll } = connections(options.redis);
  return clientOf(openRuntime(options, connect), closeAll);
}
