import { describe, expect, it } from 'vitest';
import {
  claudeCodeArgs,
  claudeCodeEnv,
  ClaudeCodeOptionsSchema,
  FIXED_ENV,
  startupProblem,
  type ClaudeCodeOptionsInput,
} from '../../../src/agents/claude-code/options.ts';

const parse = (input: Partial<ClaudeCodeOptionsInput> = {}) =>
  ClaudeCodeOptionsSchema.parse({ prompt: 'hi', ...input });

describe('claude-code options', () => {
  it('by default: stream-json with partial messages, the default permission mode, and nobody to answer a prompt', () => {
    expect(claudeCodeArgs(parse())).toEqual([
      '-p',
      '--output-format',
      'stream-json',
      '--verbose',
      '--include-partial-messages',
      '--permission-mode',
      'default',
      '--permission-prompts',
      'none',
    ]);
  });

  it('with permissionPrompts "ask": the prompt goes in as stream-json and the permission prompts come out on stdio', () => {
    const args = claudeCodeArgs(parse({ permissionPrompts: 'ask' }));
    expect(args.slice(0, 6)).toEqual([
      '-p',
      '--input-format',
      'stream-json',
      '--output-format',
      'stream-json',
      '--verbose',
    ]);
    expect(args.slice(-6)).toEqual([
      '--permission-mode',
      'default',
      '--permission-prompts',
      'host',
      '--permission-prompt-tool',
      'stdio',
    ]);
    expect(args).not.toContain('none');
    expect(ClaudeCodeOptionsSchema.safeParse({ prompt: 'x', permissionPrompts: 'always' }).success).toBe(false);
  });

  it('never puts the prompt in argv', () => {
    expect(claudeCodeArgs(parse({ prompt: '--dangerously-skip-permissions' }))).not.toContain(
      '--dangerously-skip-permissions',
    );
  });

  it('passes each tool rule as its own --allowedTools=<rule> (the flag is variadic)', () => {
    const args = claudeCodeArgs(
      parse({
        allowedTools: ['Bash(git log *)', 'Edit'],
        disallowedTools: ['WebFetch'],
        permissionMode: 'acceptEdits',
      }),
    );
    expect(args).toContain('--allowedTools=Bash(git log *)');
    expect(args).toContain('--allowedTools=Edit');
    expect(args).toContain('--disallowedTools=WebFetch');
    expect(args.slice(args.indexOf('--permission-mode'), args.indexOf('--permission-mode') + 2)).toEqual([
      '--permission-mode',
      'acceptEdits',
    ]);
  });

  it('resumes by id, or saves nothing', () => {
    const id = '0e753451-2f7e-4269-b6f0-68fac1eae933';
    expect(claudeCodeArgs(parse({ session: { mode: 'resume', id } }))).toEqual(
      expect.arrayContaining(['--resume', id]),
    );
    expect(claudeCodeArgs(parse({ session: { mode: 'none' } }))).toContain('--no-session-persistence');
    expect(ClaudeCodeOptionsSchema.safeParse({ prompt: 'x', session: { mode: 'resume', id: '--help' } }).success).toBe(
      false,
    );
  });

  it('rejects retry fields, blank prompts, unknown permission modes and malformed tool rules', () => {
    for (const bad of [
      { maxRetries: 3 },
      { prompt: '  ' },
      { permissionMode: 'yolo' },
      { allowedTools: ['Bash\n--x'] },
    ]) {
      expect(ClaudeCodeOptionsSchema.safeParse({ prompt: 'hi', ...bad }).success).toBe(false);
    }
  });

  it('builds the env explicitly: ANTHROPIC_* from env, TMPDIR and CLAUDE_CONFIG_DIR set, retries off whatever env says', () => {
    const env = claudeCodeEnv(
      parse({
        env: { ANTHROPIC_BASE_URL: 'http://127.0.0.1:9', ANTHROPIC_API_KEY: 'k', CLAUDE_CODE_MAX_RETRIES: '5' },
        configDir: '/tmp/cfg',
        tmpDir: '/tmp/t',
      }),
      { PATH: '/bin', REDIS_URL: 'redis://secret', SESSIOND_API_TOKEN: 't' },
    );
    expect(env).toMatchObject({
      ...FIXED_ENV,
      PATH: '/bin',
      ANTHROPIC_BASE_URL: 'http://127.0.0.1:9',
      ANTHROPIC_API_KEY: 'k',
      TMPDIR: '/tmp/t',
      CLAUDE_CONFIG_DIR: '/tmp/cfg',
    });
    expect(env.CLAUDE_CODE_MAX_RETRIES).toBe('0');
    expect(env).not.toHaveProperty('REDIS_URL');
    expect(env).not.toHaveProperty('SESSIOND_API_TOKEN');
    expect(claudeCodeEnv(parse(), { PATH: '/bin' }).TMPDIR).toBeTruthy();
  });

  it('refuses bypassPermissions as root unless the caller declared a sandbox with IS_SANDBOX=1', () => {
    const bypass = parse({ permissionMode: 'bypassPermissions' });
    expect(startupProblem(bypass, {}, 0)).toContain('IS_SANDBOX=1');
    expect(startupProblem(bypass, { IS_SANDBOX: '1' }, 0)).toBeNull();
    expect(startupProblem(bypass, {}, 1000)).toBeNull();
    expect(startupProblem(parse(), {}, 0)).toBeNull();
  });
});
