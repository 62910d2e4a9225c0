import { Runtime, type RuntimeOptions } from '../runtime/runtime.ts';
import type { Client, SessionHandle } from './client.ts';
import { sessionReader, sessionsReader } from './reader.ts';

const RUNTIMES = new WeakMap<Client, Runtime>();

/**
 * The client over a new Runtime made from `options` (createClient's, or the CLI's from its configuration).
 * `onClose` runs after the runtime's connections are closed.
 */
export function bindClient(options: RuntimeOptions, onClose: () => void | Promise<void> = () => undefined): Client {
  return clientOver(new Runtime(options), onClose);
}

/** The client over a Runtime made elsewhere (the tests', which drive one of their own); `close()` closes that runtime. */
export function clientOver(runtime: Runtime, onClose: () => void | Promise<void> = () => undefined): Client {
  const session = (sessionId: string): SessionHandle => ({
    ...sessionReader(runtime.reads, sessionId),
    prompt: async (request) => {
      const { turn, promptId, steered } = await runtime.enqueue({ ...request, sessionId }, { mustExist: true });
      return { sessionId, turn, promptId, steered };
    },
    cancel: (reason) => runtime.cancel(sessionId, reason),
    retry: () => runtime.retry(sessionId),
    resume: () => runtime.resumeParked(sessionId),
    delete: (o = {}) => runtime.deleteSession(sessionId, o),
    export: () => runtime.exportSession(sessionId),
    undo: (o = {}) => runtime.undoTurn(sessionId, o),
    fork: (o) => runtime.forkAtTurn(sessionId, o),
    diff: (o = {}) => runtime.turnDiff(sessionId, o),
  });
  const client: Client = {
    sessions: {
      ...sessionsReader(runtime.reads),
      enqueue: (request, o = {}) => runtime.enqueue(request, o.owner === undefined ? {} : { owner: o.owner }),
      import: (archive, o) => runtime.importSession(archive, o),
      cancelMatching: (filter) => runtime.cancelMatching(filter),
      deletions: (o = {}) => runtime.deletions(o.limit),
    },
    session,
    prompts: {
      list: (sessionId) => runtime.queuedPrompts(sessionId),
      remove: (sessionId, promptId, o) => runtime.removeQueuedPrompt(sessionId, promptId, o),
    },
    approvals: {
      decide: (sessionId, requestId, d) =>
        runtime.decideApproval(sessionId, requestId, d.verdict, d.by, d.option, d.reason),
    },
    retryPolicy: {
      get: (o = {}) => runtime.getPolicy(o.sessionId),
      set: (patch, o = {}) => runtime.setPolicy(patch, o.sessionId),
      reset: (o = {}) => runtime.resetPolicy(o.sessionId),
    },
    dispatch: {
      pause: (limit) => runtime.pauseDispatch(limit),
      resume: (limit) => runtime.resumeDispatch(limit),
      status: () => runtime.limitsView(),
    },
    deployment: {
      ping: () => runtime.reads.ping(),
      policy: () => runtime.resolvedPolicy(),
      workers: () => runtime.workers(),
      bullQueue: () => runtime.bullQueue(),
    },
    schedules: {
      add: (request, o = {}) => runtime.addSchedule(request, o),
      list: () => runtime.listSchedules(),
      get: (id) => runtime.getSchedule(id),
      remove: (id) => runtime.removeSchedule(id),
      pause: (id) => runtime.pauseSchedule(id),
      resume: (id) => runtime.resumeSchedule(id),
      runs: (id) => runtime.scheduleRuns(id),
    },
    async close() {
      await runtime.close();
      await onClose();
    },
  };
  RUNTIMES.set(client, runtime);
  return client;
}

/**
 * The Runtime under a client made here: for sessiond's own HTTP server and metrics while they move onto the
 * client (not exported by the package).
 */
export function runtimeOf(client: Client): Runtime {
  const runtime = RUNTIMES.get(client);
  if (runtime === undefined) throw new TypeError('runtimeOf: not a client made by createClient');
  return runtime;
}
