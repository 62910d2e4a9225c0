import { plainClientSettings, type ClientSettings } from '../../config/client-settings.ts';
import { rawConfig } from '../../config/raw.ts';
import { connections } from '../../api/connections.ts';
import { readerOver, type Reader } from '../../api/reader.ts';
import { readerParts } from '../../runtime/caller/reader-parts.ts';
import { resolveRedisUrl } from './resolve-redis.ts';
import { SessionReads } from '../../runtime/session-reads.ts';
import { CliError } from './cli-error.ts';
import { reachRedis, trackingErrors } from './reach-redis.ts';

/** What a read-only command (`inspect`, `list`, `watch`) works with: openReader. */
export interface ReaderContext {
  settings: ClientSettings;
  url: string;
  /** The public read-only client (createReader's): no queue, no agents, no policy. */
  reader: Reader;
  close(): Promise<void>;
}

/**
 * A read-only command's context: the same configuration and Redis as openClient's (context.ts), a
 * Reader instead of a Client. A configuration of nothing but REDIS_URL, SESSIOND_PREFIX and
 * SESSIOND_STATE_DIR is read without its schema; any other is read and checked whole by context.ts,
 * which is loaded for that alone (it brings the configuration's schema, and with the client the
 * runtime: what this context exists to leave out).
 */
export async function openReader(flags: Record<string, unknown> = {}): Promise<ReaderContext> {
  let raw: Record<string, unknown>;
  try {
    raw = rawConfig(flags);
  } catch (error) {
    throw new CliError(`configuration: ${(error as Error).message}`);
  }
  const settings = plainClientSettings(raw) ?? (await (await import('./context.ts')).checkedClientSettings(flags));
  const url = await resolveRedisUrl(settings);
  // Connections made here are closed with the context.
  const made = connections(url);
  const { closeAll } = made;
  const { connect, lastError } = trackingErrors(made.connect);
  const reader = readerOver(
    new SessionReads(
      readerParts({
        connect,
        prefix: settings.prefix,
        limits: settings.lifecycle,
        queuePartitions: settings.queuePartitions,
      }),
    ),
    closeAll,
  );
  await reachRedis(() => reader.deployment.ping(), url, lastError, closeAll);
  return {
    settings,
    url,
    reader,
    async close() {
      // Closing on the way out: the connections are dropped just below anyway.
      await reader.close().catch(() => undefined);
      closeAll();
    },
  };
}
