import type { SessionContext } from '../../machines/types.ts';
import type { SessionStore } from './store/session-store.ts';

/**
 * An operator's early resume of a session parked at a quota wall. The request is a field of the
 * session's meta naming the wall it is meant for (`turn/attempt` of the attempt that hit it): the
 * holder applies it only to that wall, so a request that arrives after the session left the wall by
 * itself cannot cut a later wall short. The holder deletes the field once it has read it.
 */
export const RESUME_FIELD = 'resumeWall';

/** Which wall a parked session is behind: its turn and the attempt that hit it. */
export function wallToken(context: Pick<SessionContext, 'turnIndex' | 'attempt'>): string {
  return `${context.turnIndex}/${context.attempt}`;
}

/** KEYS: meta. ARGV: field, token. → 1 stored | 0 no such session, or one being deleted. */
const REQUEST = `
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'deleting') == 1 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
`;

/** KEYS: meta. ARGV: field, token. Deletes the request if it is still this one (a newer one stays). */
const CONSUME = `
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then redis.call('HDEL', KEYS[1], ARGV[1]) return 1 end
return 0
`;

export async function requestResume(store: SessionStore, sessionId: string, token: string): Promise<boolean> {
  return (await store.redis.eval(REQUEST, 1, store.key(sessionId, 'meta'), RESUME_FIELD, token)) === 1;
}

export async function consumeResume(store: SessionStore, sessionId: string, token: string): Promise<void> {
  await store.redis.eval(CONSUME, 1, store.key(sessionId, 'meta'), RESUME_FIELD, token);
}
