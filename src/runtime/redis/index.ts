export {
  createRedis,
  forBullMQ,
  parseRedisUrl,
  parseRedisTarget,
  isCluster,
  reconnectDelay,
  redactUrl,
  DEFAULT_MAX_RETRIES_PER_REQUEST,
  DEFAULT_REDIS_PORT,
  type CreateRedisOptions,
  type ParsedRedisUrl,
  type ParsedRedisTarget,
  type SeedNode,
  type RedisLogger,
} from './connection.ts';
export {
  ensureLocalRedis,
  findRedisServer,
  installRedisHelp,
  stopRedisProcess,
  DEFAULT_LOCAL_REDIS_PORT,
  type EnsureLocalRedisOptions,
  type LocalRedis,
} from './local-server.ts';
export { pingRedis, redisServerInfo, sendCommands, type PingResult, type RespReply } from './probe.ts';
