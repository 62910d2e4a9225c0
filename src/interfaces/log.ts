import { destination, pino, type Logger } from 'pino';

/**
 * Structured logs (JSON lines on stderr). Secrets never reach them: fields
 * that may hold one are redacted, and Redis URLs are logged only redacted.
 */
export function createLogger(name: string, level = process.env.SESSIOND_LOG_LEVEL ?? 'info'): Logger {
  return pino(
    {
      name,
      level,
      redact: {
        paths: [
          'redisUrl',
          'url',
          'token',
          'password',
          'apiKey',
          'authorization',
          '*.redisUrl',
          '*.token',
          '*.password',
          '*.apiKey',
          '*.authorization',
          'headers.authorization',
          'env',
        ],
        censor: '***',
      },
    },
    destination(2),
  );
}

export type { Logger };
