import { describe, expect, it } from 'vitest';
import { classifyCodexError } from '../../../src/agents/codex/failure.ts';
import { codexArgs, CodexOptionsSchema, type CodexOptionsInput } from '../../../src/agents/codex/options.ts';
import { providerArgs, selectedProvider } from '../../../src/agents/codex/provider-config.ts';

const parse = (input: Partial<CodexOptionsInput>) => CodexOptionsSchema.parse({ prompt: 'hi', ...input });
const THREAD = '01a22958-c3ff-74e2-a8e3-aae33327962b';

describe('codex options', () => {
  it('the sandbox is read-only unless chosen, and is always on the command line', () => {
    expect(parse({}).sandbox).toBe('read-only');
    expect(codexArgs(parse({}), [])).toEqual([
      'exec',
      '--json',
      '--skip-git-repo-check',
      '-c',
      'sandbox_mode="read-only"',
      '-',
    ]);
    expect(codexArgs(parse({ sandbox: 'workspace-write' }), [])).toContain('sandbox_mode="workspace-write"');
    expect(CodexOptionsSchema.safeParse({ prompt: 'hi', sandbox: 'yolo' }).success).toBe(false);
  });

  it('a resume is `exec resume … <thread id> -`, with the same sandbox override (exec resume has no --sandbox)', () => {
    const args = codexArgs(
      parse({ session: { mode: 'resume', id: THREAD }, model: 'gpt-5.5', sandbox: 'danger-full-access' }),
      ['-c', 'x=1'],
    );
    expect(args).toEqual([
      'exec',
      'resume',
      '--json',
      '--skip-git-repo-check',
      '-c',
      'sandbox_mode="danger-full-access"',
      '-c',
      'x=1',
      '-m',
      'gpt-5.5',
      THREAD,
      '-',
    ]);
  });

  it('the prompt never reaches argv: it is `-`, read from stdin', () => {
    const args = codexArgs(parse({ prompt: '--dangerously-bypass-approvals-and-sandbox' }), []);
    expect(args.at(-1)).toBe('-');
    expect(args).not.toContain('--dangerously-bypass-approvals-and-sandbox');
  });

  it('session none is --ephemeral; extra args come before the positionals', () => {
    expect(codexArgs(parse({ session: { mode: 'none' }, extraArgs: ['--ignore-rules'] }), [])).toEqual([
      'exec',
      '--json',
      '--skip-git-repo-check',
      '-c',
      'sandbox_mode="read-only"',
      '--ephemeral',
      '--ignore-rules',
      '-',
    ]);
  });

  it('rejects what Codex would misread: a non-UUID thread id, provider with baseUrl, envKey without baseUrl, retry fields', () => {
    expect(CodexOptionsSchema.safeParse({ prompt: 'hi', session: { mode: 'resume', id: '--last' } }).success).toBe(
      false,
    );
    expect(CodexOptionsSchema.safeParse({ prompt: 'hi', provider: 'a', baseUrl: 'http://x/v1' }).success).toBe(false);
    expect(CodexOptionsSchema.safeParse({ prompt: 'hi', envKey: 'K' }).success).toBe(false);
    expect(CodexOptionsSchema.safeParse({ prompt: 'hi', baseUrl: 'ftp://x/v1' }).success).toBe(false);
    expect(CodexOptionsSchema.safeParse({ prompt: 'hi', maxRetries: 3 }).success).toBe(false);
    expect(CodexOptionsSchema.safeParse({ prompt: '  ' }).success).toBe(false);
  });
});

describe('the model provider and its retries', () => {
  it('baseUrl: sessiond defines the provider, with both retry counts at 0', () => {
    const result = providerArgs({ baseUrl: 'http://127.0.0.1:9/x/v1', envKey: 'MY_KEY' }, 'model_provider = "other"\n');
    expect(result).toEqual({
      ok: true,
      providerId: 'sessiond',
      args: [
        '-c',
        'model_provider="sessiond"',
        '-c',
        'model_providers.sessiond={ name = "sessiond", base_url = "http://127.0.0.1:9/x/v1", wire_api = "responses", env_key = "MY_KEY", request_max_retries = 0, stream_max_retries = 0 }',
      ],
    });
  });

  it("the user's config.toml provider (top level or active profile) keeps its settings but gets its retries forced to 0", () => {
    const config = [
      'model_provider = "mine" # comment',
      'profile = "work"',
      '',
      '[model_providers.mine]',
      'base_url = "http://x"',
      'request_max_retries = 9',
      '',
    ].join('\n');
    expect(providerArgs({}, config)).toEqual({
      ok: true,
      providerId: 'mine',
      args: ['-c', 'model_providers.mine.request_max_retries=0', '-c', 'model_providers.mine.stream_max_retries=0'],
    });
    expect(selectedProvider(`${config}\n[profiles.work]\nmodel_provider = 'corp'\n`)).toBe('corp');
    expect(selectedProvider('[model_providers.x]\nmodel_provider = "not-top-level"\n')).toBeUndefined();
    expect(
      selectedProvider('instructions = """\nmodel_provider = "inside a string"\n"""\nmodel_provider = "real"\n'),
    ).toBe('real');
  });

  it('an explicit provider is selected and its retries forced to 0', () => {
    expect(providerArgs({ provider: 'corp' }, null)).toEqual({
      ok: true,
      providerId: 'corp',
      args: [
        '-c',
        'model_provider="corp"',
        '-c',
        'model_providers.corp.request_max_retries=0',
        '-c',
        'model_providers.corp.stream_max_retries=0',
      ],
    });
  });

  it("Codex's built-in providers (whose retries Codex will not let anyone change) are refused with the way out", () => {
    for (const [options, config] of [
      [{}, null],
      [{}, 'model_provider = "ollama"\n'],
      [{ provider: 'openai' }, null],
    ] as const) {
      const result = providerArgs(options, config);
      expect(result.ok).toBe(false);
      if (!result.ok) expect(result.error).toContain('baseUrl');
    }
  });
});

describe("Codex's error texts", () => {
  it.each([
    ['We’re currently experiencing high demand, which may cause temporary errors.', 'server_error'],
    ['Selected model is at capacity. Please try a different model.', 'server_error'],
    [
      "Codex ran out of room in the model's context window. Start a new thread or clear earlier history before retrying.",
      'bad_request',
    ],
    ['{"error":{"message":"fake bad request","type":"invalid_request_error","code":null,"param":null}}', 'bad_request'],
    ['{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}', 'rate_limited'],
    ['stream disconnected before completion: Transport error: network error: error decoding response body', 'network'],
    ['stream disconnected before completion: fake failure', 'network'],
    ['unexpected status 401 Unauthorized: fake invalid api key, url: http://x/v1/responses', 'auth'],
    ['exceeded retry limit, last status: 429 Too Many Requests', 'rate_limited'],
    ['unexpected status 503 Service Unavailable: down', 'server_error'],
    ['plain bad', 'unknown'],
  ] as const)('%s → %s', (text, category) => {
    expect(classifyCodexError(text).category).toBe(category);
  });
});
