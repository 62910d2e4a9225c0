import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import {
  ArchiveError,
  ConfigError,
  ConflictError,
  CursorError,
  ERROR_CODES,
  hasErrorCode,
  InputError,
  NotFoundError,
  PolicyError,
  QuotaError,
  StaleLeaseError,
} from '../src/errors.ts';
import { loadConfig } from '../src/config/config.ts';

describe('sessiond errors', () => {
  it('each kind has its own stable code', () => {
    const errors = [
      new InputError([{ field: 'prompt', message: 'must not be empty' }]),
      new NotFoundError('unknown session "x"'),
      new ConflictError('being deleted'),
      new QuotaError('maxQueuedPrompts', 100, 'too many prompts'),
      new StaleLeaseError('s1'),
      new CursorError('bad cursor'),
      new ArchiveError('not an archive', 1),
      new ConfigError('worker.concurrency: must be an integer'),
      new PolicyError('policy.agents: unknown agent'),
    ];
    expect(errors.map((e) => e.code)).toEqual([...ERROR_CODES]);
    for (const error of errors) expect(hasErrorCode(error, error.code)).toBe(true);
    expect(hasErrorCode(errors[0], 'not_found')).toBe(false);
  });

  it('are recognised by code after a process boundary (serialised) and from another realm, where instanceof is not', () => {
    const original = new QuotaError('maxLogMessages', 10, 'the log is full');
    const serialised: unknown = JSON.parse(
      JSON.stringify({ name: original.name, code: original.code, message: original.message, limit: original.limit }),
    );
    expect(serialised instanceof QuotaError).toBe(false);
    expect(hasErrorCode(serialised, 'quota_exceeded')).toBe(true);

    const foreign: unknown = runInNewContext('const e = new Error("unknown session"); e.code = "not_found"; e');
    expect(foreign instanceof Error).toBe(false);
    expect(hasErrorCode(foreign, 'not_found')).toBe(true);
  });

  it('ignore what is not an error of theirs', () => {
    for (const value of [
      null,
      undefined,
      'not_found',
      { code: 'not_found' },
      new Error('x'),
      { code: 'ENOENT', message: 'no file' },
    ])
      expect(hasErrorCode(value, 'not_found')).toBe(false);
  });

  it('a bad configuration throws a ConfigError with its code, naming the field', () => {
    let thrown: unknown;
    try {
      loadConfig({}, { SESSIOND_CONCURRENCY: 'many' });
    } catch (error) {
      thrown = error;
    }
    expect(hasErrorCode(thrown, 'invalid_config')).toBe(true);
    expect((thrown as Error).message).toContain('worker.concurrency');
  });
});
