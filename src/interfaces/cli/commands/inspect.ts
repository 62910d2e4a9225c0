import type { Command } from 'commander';
import type { SessionSummary } from '../../../runtime/inspect.ts';
import { sessionCommandError } from '../cli-error.ts';
import { colors, formatMs, printJson } from '../present.ts';
import { formatUsage } from '../../../runtime/usage/usage.ts';
import { openReader } from '../open-client.ts';

export function registerInspect(program: Command): void {
  program
    .command('inspect')
    .description(
      'Show a session: machine state, latest turn, attempts, next retry, last failure, transition history (exit 3 for an unknown id)',
    )
    .argument('<sessionId>')
    .option('--json', 'one JSON object')
    .action(async (sessionId: string, flags: { json?: boolean }) => {
      const ctx = await openReader();
      try {
        // An unknown session exits 3, a malformed id 2 (the reader's NotFoundError and InputError).
        const summary = await ctx.reader
          .session(sessionId)
          .inspect()
          .catch((error: unknown) => Promise.reject(sessionCommandError(error)));
        if (flags.json === true) printJson(summary);
        else process.stdout.write(render(summary));
      } finally {
        await ctx.close();
      }
    });
}

function render(s: SessionSummary): string {
  const c = colors();
  const lines = [
    `${c.bold(s.sessionId)}  state ${c.bold(s.state)}  agent ${s.agent}${s.agentSessionId ? ` (session ${s.agentSessionId})` : ''}`,
  ];
  if (s.webhook !== undefined) lines.push(`webhook ${s.webhook}`);
  if (s.turn !== null) {
    const reason = s.turn.failureReason
      ? ` (${s.turn.failureReason})`
      : s.turn.cancelReason
        ? ` (${s.turn.cancelReason})`
        : '';
    const counted =
      s.turn.attemptsCounted < s.turn.attempts.length
        ? `, ${s.turn.attemptsCounted} of its ${s.turn.attempts.length} attempts counted`
        : '';
    lines.push(
      `turn ${s.turn.index}: ${c.bold(s.turn.status)}${reason}${counted}${s.turn.usage === undefined ? '' : `  tokens ${formatUsage(s.turn.usage)}`}`,
    );
    for (const a of s.turn.attempts) {
      const outcome = a.outcome ?? 'running';
      const paint = outcome === 'completed' ? c.green : outcome === null || outcome === 'running' ? c.cyan : c.red;
      lines.push(
        `  attempt ${a.attempt}: ${paint(outcome)}${a.category ? ` ${a.category}` : ''}${a.quotaWall !== undefined ? `, quota wall (${a.quotaWall})` : ''}${a.delayMs != null ? `, retry after ${formatMs(a.delayMs)}` : ''}${a.usage === undefined ? '' : `, tokens ${formatUsage(a.usage)}`}${a.sandbox === undefined ? '' : `, sandbox ${a.sandbox}`}${a.errorText ? c.dim(` — ${a.errorText.split('\n')[0]}`) : ''}`,
      );
    }
  }
  if (s.waitingFor?.reason === 'agent')
    lines.push(
      c.yellow(
        `waiting for a worker offering agent ${s.waitingFor.agent ?? s.waitingFor.limit} since ${new Date(s.waitingFor.since).toISOString()}: no worker that took it runs that agent; looks again by ${new Date(s.waitingFor.until).toISOString()}`,
      ),
      c.dim(`  start a worker that has it (sessiond doctor lists what each live worker offers)`),
    );
  else if (s.waitingFor !== undefined)
    lines.push(
      `waiting for limit ${s.waitingFor.limit} (${s.waitingFor.reason}) since ${new Date(s.waitingFor.since).toISOString()}; looks again by ${new Date(s.waitingFor.until).toISOString()}`,
    );
  if (s.parkedUntil !== undefined)
    lines.push(
      c.yellow(
        `parked at a quota wall until ${new Date(s.parkedUntil.until).toISOString()} (in ${formatMs(Math.max(0, s.parkedUntil.until - Date.now()))}), since ${new Date(s.parkedUntil.since).toISOString()}; the attempt ${s.parkedUntil.free ? 'was not' : 'was'} counted`,
      ),
      c.dim(`  sessiond resume ${s.sessionId}  (resume now, before the reset)`),
    );
  for (const a of s.approvals) {
    if (a.decision !== undefined) {
      lines.push(
        `approval ${a.requestId}: ${a.decision.outcome} by ${a.decision.by}, given to the agent when it asks again`,
      );
      continue;
    }
    lines.push(
      c.yellow(
        `awaiting approval ${a.requestId}: ${a.tool}${a.kind === undefined ? '' : ` (${a.kind})`} ${JSON.stringify(a.arguments)}`,
      ),
    );
    lines.push(
      `  options: ${a.options.map((o) => `${o.optionId} (${o.kind})`).join(', ')}; denied at ${new Date(a.deadlineAt).toISOString()}`,
    );
    lines.push(
      c.dim(
        `  sessiond approve ${s.sessionId} ${a.requestId} [--option ID|KIND]  ·  sessiond deny ${s.sessionId} ${a.requestId}`,
      ),
    );
  }
  if (s.nextRetryAt !== undefined && s.parkedUntil === undefined)
    lines.push(
      `next retry at ${new Date(s.nextRetryAt).toISOString()} (in ${formatMs(Math.max(0, s.nextRetryAt - Date.now()))})`,
    );
  if (s.lastFailure !== undefined)
    lines.push(`last failure: ${s.lastFailure.category} — ${s.lastFailure.errorText.split('\n')[0]}`);
  if (s.queuedPrompts > 0) lines.push(`${s.queuedPrompts} prompt(s) waiting`);
  if (s.steers.length > 0) {
    lines.push(`${s.steers.length} steer(s) pending for the running turn:`);
    for (const steer of s.steers) lines.push(`  ${steer.id}: ${steer.text.split('\n')[0]?.slice(0, 100) ?? ''}`);
  }
  if (s.usage !== undefined) {
    lines.push(`tokens (session): ${formatUsage(s.usage.total)}`);
    if (s.usage.byModel.length > 1)
      for (const m of s.usage.byModel) lines.push(`  ${m.agent} ${m.model}: ${formatUsage(m.usage)}`);
  }
  lines.push('history:');
  for (const t of s.history) {
    lines.push(`  ${new Date(t.at).toISOString()}  ${t.from} → ${t.to}  ${t.label}  ${c.dim(t.event)}`);
    // The prompt a transition started a turn with, whole (cut only past TURN_PROMPT_MAX_CHARS when stored).
    if (t.prompt !== undefined) {
      const text = t.prompt.text.split('\n').join('\n      ');
      lines.push(
        `      prompt of turn ${t.prompt.turn}: ${text}${t.prompt.truncated === true ? c.dim(' …(cut when stored)') : ''}`,
      );
    }
  }
  return `${lines.join('\n')}\n`;
}
