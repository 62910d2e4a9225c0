import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runPi } from '../../../src/agents/pi/provider.ts';
import { PolicySchema } from '../../../src/policy/schema.ts';
import { detectSandbox, probeMode, spawnAgent } from '../../../src/process/index.ts';
import { resetSandboxDetection } from '../../../src/process/sandbox/index.ts';

afterEach(() => resetSandboxDetection());

describe('sandbox modes', () => {
  it('SESSIOND_SANDBOX picks the mode; an unknown value or an unavailable mode refuses attempts with the reason', () => {
    expect(detectSandbox({ SESSIOND_SANDBOX: 'bwrap' })).toMatchObject({
      requested: 'bwrap',
      mode: 'bwrap',
      gaps: [],
      refused: null,
    });
    resetSandboxDetection();
    expect(detectSandbox({ SESSIOND_SANDBOX: 'auto' })).toMatchObject({
      requested: 'auto',
      mode: 'bwrap',
      refused: null,
    });
    resetSandboxDetection();
    const none = detectSandbox({ SESSIOND_SANDBOX: 'none' });
    expect(none.mode).toBe('none');
    expect(none.gaps.join(' ')).toContain('/proc/<pid>/environ');
    resetSandboxDetection();
    expect(detectSandbox({ SESSIOND_SANDBOX: 'docker' }).refused).toBe(
      'SESSIOND_SANDBOX="docker" is not one of auto, bwrap, landlock, none',
    );
  });

  it('a probe that passed is not run again (each attempt that names its mode asks): bwrap gone from PATH later changes nothing', () => {
    expect(probeMode('bwrap')).toBeNull();
    const path = process.env.PATH;
    const empty = mkdtempSync(join(tmpdir(), 'sessiond-no-bwrap-'));
    try {
      // Probed again, bwrap would now be "not installed".
      process.env.PATH = empty;
      expect(probeMode('bwrap')).toBeNull();
    } finally {
      process.env.PATH = path;
      rmSync(empty, { recursive: true, force: true });
    }
  });

  it('a host whose mode was refused refuses each attempt, naming why', async () => {
    detectSandbox({ SESSIOND_SANDBOX: 'docker' });
    const result = await spawnAgent({
      command: 'true',
      args: [],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      sandbox: {},
    });
    expect(result).toMatchObject({ ok: false, code: 'ESANDBOX' });
    if (!result.ok) expect(result.error).toContain('SESSIOND_SANDBOX="docker"');
  });

  it('policy.sandbox.required: an attempt without a sandbox fails at start with a clear reason, nothing runs', async () => {
    expect(PolicySchema.parse({ sandbox: { required: true } }).sandbox).toEqual({ required: true });
    expect(PolicySchema.safeParse({ sandbox: { required: 'yes' } }).success).toBe(false);
    detectSandbox({ SESSIOND_SANDBOX: 'none' });
    const messages = [];
    for await (const message of runPi(
      { prompt: 'hi', command: 'sessiond-never-started' },
      { sandbox: { required: true } },
    ))
      messages.push(message);
    const terminal = messages.at(-1);
    expect(terminal?.type).toBe('terminal.failed');
    expect(terminal?.content).toMatchObject({ category: 'startup' });
    expect(JSON.stringify(terminal)).toContain('the deployment policy requires a sandbox (policy.sandbox.required)');
  });
});
