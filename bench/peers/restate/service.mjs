// The Restate peer of sessiond for `npm run bench -- peers` (bench/peers.ts): the same job — a durable
// chat session whose prompts each run one agent attempt at a time — written as Restate's documentation
// and examples write it:
//
// - one virtual object per session (`session`, keyed by the session id): its exclusive `prompt` handler
//   is the session's single writer, Restate queues further prompts for the same key behind it;
// - the agent's output made durable message by message: each message is read from the running attempt
//   in its own journaled side effect (`ctx.run`), which resolves only once Restate has stored it, and kept
//   in the object's K/V state (one key per message, `m<seq>`), so that the shared `messages` and `view`
//   handlers (which do not wait for the lock) can read the log while the turn runs;
// - retries owned by the handler: a failed attempt is followed by a durable `ctx.sleep` with exponential
//   backoff, then a fresh attempt (a new process), up to MAX_ATTEMPTS;
// - cancellation through Restate's invocation cancellation (admin API `PATCH /invocations/<id>/cancel`):
//   the awaited `ctx.run` rejects with a TerminalError (CancelledError), and the handler stops the agent's
//   process group as a compensating side effect (the sagas pattern of Restate's docs), records the
//   `cancelled` state and rethrows;
// - the agent's process is stopped when its attempt ends for any other reason too (Restate's
//   `attemptCompletedSignal`: the server broke off the attempt, this process is shutting down).
//
// What cannot be journaled is the live process itself: it belongs to this service process. After this
// process dies (kill -9), Restate replays the handler on the next one; the attempt's journaled messages
// come back from the journal, the next read finds no live process for the attempt and fails it, and the
// handler retries with a new attempt as after any failed attempt. The dead process's agents are not
// stopped by anyone (Node has no parent-death signal): the benchmark counts them.
//
// Run as `node --import tsx bench/peers/restate/service.mjs` (tsx for sessiond's pi mapper, shared with
// sessiond so that both sides parse the agent's output with the same code). Environment:
//   RESTATE_PEER_PORT   port to listen on, on 127.0.0.1 (required)
//   RESTATE_PEER_AGENTS JSON: { "<profile>": { "kind": "inproc", "messages": N } |
//                               { "kind": "process", "command": "...", "args": [...] } }
// A prompt names its agent profile; the profiles are the operator's (this process's environment).
// Prints "restate-peer listening <port>" on stdout once it listens.

// Restate's TypeScript SDK 1.17 calls Promise.withResolvers, which Node 20 lacks.
if (typeof Promise.withResolvers !== 'function') {
  Promise.withResolvers = function withResolvers() {
    let resolve;
    let reject;
    const promise = new this((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return { promise, resolve, reject };
  };
}

const { spawn } = await import('node:child_process');
const { randomUUID } = await import('node:crypto');
const http2 = await import('node:http2');
const restate = await import('@restatedev/restate-sdk');
const { PiMapper } = await import('../../../src/agents/pi/mapper.ts');
const { LineSplitter } = await import('../../../src/process/split-lines.ts');

const PORT = Number(process.env.RESTATE_PEER_PORT);
const AGENTS = JSON.parse(process.env.RESTATE_PEER_AGENTS ?? '{}');
const MAX_ATTEMPTS = 3;
const BACKOFF_MS = 250;
const BACKOFF_MAX_MS = 5000;
/** SIGTERM to the agent's process group, then SIGKILL after this (sessiond's interrupt grace for pi). */
const KILL_GRACE_MS = 2000;
/** The agent's stderr kept for the failure message. */
const STDERR_TAIL = 2000;

const DELTAS = [
  'Looking at the session store, ',
  'the writer batches every ',
  'message of a transition ',
  'into one fenced Lua call; ',
  'the lease is checked first. ',
];

/** The attempts running in this process, by handle (journaled by the handler). */
const attempts = new Map();

/** One running agent attempt: messages are queued as the agent produces them and taken one at a time. */
class Attempt {
  queue = [];
  waiter = null;
  ended = false;
  child = null;
  exited = null;

  push(message) {
    this.queue.push(message);
    const wake = this.waiter;
    this.waiter = null;
    wake?.();
  }

  async next() {
    while (this.queue.length === 0) await new Promise((resolve) => (this.waiter = resolve));
    return this.queue.shift();
  }

  /** Stops the agent's process group: SIGTERM, then SIGKILL after the grace; resolves when it has exited. */
  async stop() {
    const child = this.child;
    if (child === null || this.exited === null) return;
    const group = (signal) => {
      try {
        process.kill(-child.pid, signal);
      } catch {
        // gone
      }
    };
    if (child.exitCode === null && child.signalCode === null) {
      group('SIGTERM');
      const timer = setTimeout(() => group('SIGKILL'), KILL_GRACE_MS);
      await this.exited;
      clearTimeout(timer);
    }
    group('SIGKILL'); // anything it left in its group
  }
}

/** The in-process fake: session.started, N − 2 assistant deltas, terminal.completed, all at once (as bench/support/fake-agent.ts). */
function startInproc(profile, prompt) {
  const attempt = new Attempt();
  const deltas = Math.max(0, profile.messages - 2);
  attempt.push({ type: 'session.started', content: { sessionId: `fake-${prompt.length}-${deltas}` } });
  for (let i = 0; i < deltas; i += 1) attempt.push({ type: 'assistant', content: { text: DELTAS[i % DELTAS.length] } });
  attempt.push({
    type: 'terminal.completed',
    content: { stopReason: 'stop', usage: { input: 1200, output: 20 * deltas, totalTokens: 1200 + 20 * deltas } },
  });
  return attempt;
}

/** An agent process (no shell), in its own process group, the prompt on stdin; its stdout mapped by sessiond's PiMapper. */
function startProcess(profile, prompt) {
  const attempt = new Attempt();
  const mapper = new PiMapper({ persistsSession: false });
  const splitter = new LineSplitter();
  let stderr = '';
  const child = spawn(profile.command, profile.args ?? [], { stdio: ['pipe', 'pipe', 'pipe'], detached: true });
  attempt.child = child;
  attempt.exited = new Promise((resolve) => child.once('close', resolve));
  child.stdin.on('error', () => undefined);
  child.stdin.end(prompt);
  child.stdout.on('data', (chunk) => {
    for (const line of splitter.push(chunk)) for (const m of mapper.push(line)) attempt.push(m);
  });
  child.stderr.on('data', (chunk) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-STDERR_TAIL);
  });
  let spawnError;
  child.once('error', (error) => (spawnError = error.message));
  child.once('close', (code, signal) => {
    const rest = splitter.flush();
    if (rest !== undefined) for (const m of mapper.push(rest)) attempt.push(m);
    for (const m of mapper.complete({
      exitCode: code,
      signal,
      stopReason: null,
      stderrTail: stderr,
      ...(spawnError ? { spawnError } : {}),
    }))
      attempt.push(m);
  });
  return attempt;
}

const isTerminal = (message) => message.type.startsWith('terminal.');

const session = restate.object({
  name: 'session',
  handlers: {
    /** One turn: `{ prompt, agent }` (agent: a profile name of this process's configuration). */
    prompt: async (ctx, request) => {
      const profile = AGENTS[request?.agent];
      if (typeof request?.prompt !== 'string' || profile === undefined)
        throw new restate.TerminalError(
          `prompt: expected {"prompt":string,"agent":one of ${Object.keys(AGENTS).join(', ')}}`,
        );
      const turn = ((await ctx.get('turns')) ?? 0) + 1;
      let seq = (await ctx.get('seq')) ?? 0;
      ctx.set('turns', turn);
      ctx.set('state', 'running');
      const append = (message, attempt) => {
        seq += 1;
        ctx.set(`m${seq}`, { seq, turn, attempt, type: message.type, content: message.content });
      };
      for (let attempt = 1; ; attempt += 1) {
        // The attempt's handle is journaled: a replay finds the same handle, and no live process behind it.
        const attemptEnded = ctx.request().attemptCompletedSignal;
        const handle = await ctx.run('start attempt', () => {
          const id = randomUUID();
          const running =
            profile.kind === 'inproc' ? startInproc(profile, request.prompt) : startProcess(profile, request.prompt);
          attempts.set(id, running);
          // The attempt ends (the server broke it off, this process is stopping): stop its agent.
          attemptEnded.addEventListener('abort', () => {
            if (attempts.get(id) === running) {
              attempts.delete(id);
              void running.stop();
            }
          });
          return id;
        });
        let last;
        try {
          for (;;) {
            const message = await ctx.run('message', () => {
              const running = attempts.get(handle);
              if (running === undefined)
                return {
                  type: 'terminal.failed',
                  content: { category: 'lost', message: 'the attempt was lost with the service process that ran it' },
                };
              return running.next();
            });
            append(message, attempt);
            if (isTerminal(message)) {
              last = message;
              break;
            }
          }
        } catch (error) {
          if (error instanceof restate.TerminalError) {
            // Cancelled (or another terminal failure): stop the agent, as a journaled compensation.
            await ctx.run('stop agent', async () => {
              const running = attempts.get(handle);
              attempts.delete(handle);
              await running?.stop();
            });
            append({ type: 'terminal.cancelled', content: { reason: error.message } }, attempt);
            ctx.set('seq', seq);
            ctx.set('state', 'cancelled');
          }
          throw error;
        }
        attempts.delete(handle);
        ctx.set('seq', seq);
        if (last.type === 'terminal.completed') {
          ctx.set('state', 'completed');
          return { state: 'completed', seq, attempts: attempt };
        }
        if (attempt >= MAX_ATTEMPTS) {
          ctx.set('state', 'failed');
          return { state: 'failed', seq, attempts: attempt };
        }
        ctx.set('state', 'backoff');
        await ctx.sleep(Math.min(BACKOFF_MS * 2 ** (attempt - 1), BACKOFF_MAX_MS));
        ctx.set('state', 'running');
      }
    },

    /** The session's state and log length, without waiting for a running turn. */
    view: restate.handlers.object.shared(async (ctx) => ({
      state: (await ctx.get('state')) ?? null,
      seq: (await ctx.get('seq')) ?? 0,
      turns: (await ctx.get('turns')) ?? 0,
    })),

    /** Messages `from`..`to` (1-based, inclusive) that are in the log, without waiting for a running turn. */
    messages: restate.handlers.object.shared(async (ctx, range) => {
      const from = Math.max(1, Number(range?.from ?? 1));
      const to = Math.min(from + 9999, Number(range?.to ?? from + 999));
      const out = [];
      for (let seq = from; seq <= to; seq += 1) {
        const m = await ctx.get(`m${seq}`);
        if (m === null) break;
        out.push(m);
      }
      return out;
    }),
  },
});

// The endpoint on 127.0.0.1 only (restate.serve / endpoint.listen bind every interface).
const server = http2.createServer(restate.endpoint().bind(session).http2Handler());
server.listen(PORT, '127.0.0.1', () => process.stdout.write(`restate-peer listening ${PORT}\n`));

const shutdown = () => {
  for (const running of attempts.values()) void running.stop();
  server.close();
  setTimeout(() => process.exit(0), KILL_GRACE_MS + 500).unref();
};
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
// Tied to the benchmark: when its pipe on stdin ends, the benchmark is gone.
process.stdin.on('end', shutdown);
process.stdin.on('error', shutdown);
process.stdin.resume();
