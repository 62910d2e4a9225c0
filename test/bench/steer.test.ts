import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * `npm run bench -- steer` as an operator runs it, with few samples: it runs its own checks (each steer
 * recorded `prompt.steered` once through the path it takes, native or restart, with no new turn; the
 * cancel ends the turn; no fake pi left) and throws, exiting 1, when one fails. Its last line is the
 * figures' JSON: only its shape is checked here, never a figure (the host is shared).
 */

function runBench(env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'bench/run.ts', 'steer'], {
      cwd: fileURLToPath(new URL('../..', import.meta.url)),
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('npm run bench -- steer', () => {
  it('passes its own checks and ends with the figures as one JSON line', async () => {
    const { code, stdout, stderr } = await runBench({ BENCH_STEER_SAMPLES: '2' });
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const last = JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as Record<string, unknown>;
    expect(Object.keys(last).slice(0, 4)).toEqual(['bench', 'nativeP99Ms', 'fallbackP99Ms', 'cancelP99Ms']);
    expect(last).toMatchObject({
      bench: 'steer',
      nativeP99Ms: expect.any(Number),
      fallbackP99Ms: expect.any(Number),
      cancelP99Ms: expect.any(Number),
      samples: 2,
    });
  });

  it('refuses a sample count that is not a whole number, naming the variable', async () => {
    const { code, stderr } = await runBench({ BENCH_STEER_SAMPLES: 'many' });
    expect(code).toBe(1);
    expect(stderr).toContain('BENCH_STEER_SAMPLES must be a whole number ≥ 1 (got "many")');
  });
});
