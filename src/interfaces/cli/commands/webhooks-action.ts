import type { Redis } from 'ioredis';
import { connections } from '../../../api/connections.ts';
import { plainClientSettings } from '../../../config/client-settings.ts';
import { rawConfig } from '../../../config/raw.ts';
import { createKeys, type Keys } from '../../../runtime/keys.ts';
import {
  deadLetters,
  parseSince,
  pendingWebhooks,
  replayDeadLetters,
  type Since,
} from '../../../runtime/webhooks/outbox.ts';
import { CliError } from '../cli-error.ts';
import { printJson } from '../present.ts';
import { reachRedis, trackingErrors } from '../reach-redis.ts';
import { resolveRedisUrl } from '../resolve-redis.ts';

async function withRedis<T>(run: (redis: Redis, keys: Keys) => Promise<T>): Promise<T> {
  let raw: Record<string, unknown>;
  try {
    raw = rawConfig({});
  } catch (error) {
    throw new CliError(`configuration: ${(error as Error).message}`);
  }
  const settings = plainClientSettings(raw) ?? (await (await import('../context.ts')).checkedClientSettings({}));
  const url = await resolveRedisUrl(settings);
  const made = connections(url);
  const { connect, lastError } = trackingErrors(made.connect);
  const redis = connect('webhooks');
  try {
    await reachRedis(() => redis.ping(), url, lastError, made.closeAll);
    return await run(redis, createKeys(settings.prefix));
  } finally {
    made.closeAll();
  }
}

function since(text: string | undefined): Since | undefined {
  if (text === undefined) return undefined;
  const parsed = parseSince(text);
  if (parsed === null) throw new CliError(`--since: must be a dead-letter number or an ISO 8601 time (got "${text}")`);
  return parsed;
}

export async function listAction(flags: { json?: boolean }): Promise<void> {
  const pending = await withRedis((redis, keys) => pendingWebhooks(redis, keys));
  if (flags.json === true) return printJson(pending);
  if (pending.length === 0) process.stdout.write('no webhook events waiting\n');
  for (const p of pending)
    process.stdout.write(
      `${p.sessionId}  ${p.waiting} waiting  next ${p.nextAt === null ? '-' : new Date(p.nextAt).toISOString()}\n`,
    );
}

export async function deadAction(flags: { since?: string; json?: boolean }): Promise<void> {
  const from = since(flags.since);
  const dead = await withRedis((redis, keys) => deadLetters(redis, keys, from));
  if (flags.json === true) return printJson(dead);
  if (dead.length === 0) process.stdout.write('no dead letters\n');
  for (const d of dead)
    process.stdout.write(
      `#${d.seq}  ${d.deadAt}  ${d.sessionId}  ${d.type}  ${d.id}  ${d.attempts} attempts  ${d.lastError}\n`,
    );
}

export async function replayAction(flags: { since: string; json?: boolean }): Promise<void> {
  const from = since(flags.since) as Since;
  const replayed = await withRedis((redis, keys) => replayDeadLetters(redis, keys, from));
  if (flags.json === true) printJson({ replayed });
  else process.stdout.write(`${replayed} dead letters queued for delivery again\n`);
}
