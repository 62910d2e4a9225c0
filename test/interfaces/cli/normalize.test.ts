import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CliMessageSchema } from '../../../src/protocol/index.ts';
import { jsonLines, runCli } from '../../support/cli.ts';
import { PI_FIXTURES } from '../../agents/pi/transcripts.ts';

describe('sessiond normalize', () => {
  it('prints one normalized message per line for a recorded pi run, exit 0', async () => {
    const result = await runCli(['normalize', join(PI_FIXTURES, 'tool.stdout.jsonl')]);
    expect(result.exitCode).toBe(0);
    const messages = jsonLines(result.stdout);
    for (const m of messages) expect(CliMessageSchema.safeParse(m).success).toBe(true);
    expect(messages.map((m) => m.type)).toContain('tool.completed');
    expect(messages.at(-1)?.type).toBe('terminal.completed');
  });

  it('reads stdin; a failed run is data (exit 0) and bad lines are reported in the terminal message', async () => {
    const input = `${readFileSync(join(PI_FIXTURES, 'http500.stdout.jsonl'), 'utf8')}this is not json\n`;
    const result = await runCli(['normalize'], { input });
    expect(result.exitCode).toBe(0);
    const last = jsonLines(result.stdout).at(-1)!;
    expect(last).toMatchObject({ type: 'terminal.failed', content: { category: 'server_error' } });
    expect(JSON.stringify(last.content.invalid_output_lines)).toContain('this is not json');
  });

  it('--exit-code N treats the end of input as pi exiting with N', async () => {
    const lines = readFileSync(join(PI_FIXTURES, 'text.stdout.jsonl'), 'utf8').split('\n').slice(0, 4).join('\n');
    const result = await runCli(['normalize', '--exit-code', '2'], { input: lines });
    expect(jsonLines(result.stdout).at(-1)).toMatchObject({
      type: 'terminal.failed',
      content: { category: 'process_crash', exitCode: 2 },
    });
  });

  it('an unreadable file exits 2 with a message naming it', async () => {
    const result = await runCli(['normalize', '/nonexistent/transcript.jsonl']);
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toContain('/nonexistent/transcript.jsonl');
    expect(result.stdout).toBe('');
  });

  it('a bad --exit-code is refused with exit 2, naming the option', async () => {
    const result = await runCli(['normalize', '--exit-code', 'abc', '-']);
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toContain('--exit-code');
  });
});
