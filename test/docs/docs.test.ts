import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Command } from 'commander';
import { buildProgram } from '../../src/interfaces/cli/main.ts';
import { runCli } from '../support/cli.ts';
import { REPO_ROOT } from '../support/pi-env.ts';
import { startRedis, uniquePrefix, type RedisServer } from '../support/redis.ts';

/**
 * Every command and code sample of the README and docs/ is checked here:
 * - each ```ts block is type-checked (strict, `sessiond` mapped to src/index.ts);
 * - each `sessiond …` line of a ```sh block names a real command, and every flag it shows is one
 *   of that command's (or a global one): a synopsis with placeholders cannot run, but it cannot
 *   drift from the program either;
 * - the commands that run offline and alone (`--version`, `--help`, and the read commands against
 *   a real redis-server) are run, and must exit 0.
 */
interface Block {
  file: string;
  line: number;
  lang: string;
  code: string;
  /** The source file a sample says it is (a `src/….ts` line just above it): its relative imports are resolved from there. */
  at?: string;
}

function markdownFiles(): string[] {
  const files = [join(REPO_ROOT, 'README.md')];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) walk(join(dir, entry.name));
      else if (entry.name.endsWith('.md')) files.push(join(dir, entry.name));
    }
  };
  walk(join(REPO_ROOT, 'docs'));
  return files;
}

function blocks(): Block[] {
  const out: Block[] = [];
  for (const file of markdownFiles()) {
    const lines = readFileSync(file, 'utf8').split('\n');
    for (let i = 0; i < lines.length; i++) {
      const open = /^```(\w+)/.exec(lines[i]!);
      if (open === null) continue;
      const start = i;
      let above = i - 1;
      while (above >= 0 && lines[above]!.trim() === '') above--;
      const at = above >= 0 ? /^`(src\/[\w./-]+\.ts)`$/.exec(lines[above]!.trim())?.[1] : undefined;
      const body: string[] = [];
      for (i++; i < lines.length && !lines[i]!.startsWith('```'); i++) body.push(lines[i]!);
      out.push({
        file: relative(REPO_ROOT, file),
        line: start + 1,
        lang: open[1]!,
        code: body.join('\n'),
        ...(at === undefined ? {} : { at }),
      });
    }
  }
  return out;
}

const ALL = blocks();
const TS = ALL.filter((b) => b.lang === 'ts');
const SH = ALL.filter((b) => b.lang === 'sh');

/** The `sessiond …` invocations of the sh blocks: a line's words after `sessiond`, a comment cut off. */
function invocations(): Array<{ where: string; words: string[] }> {
  const out: Array<{ where: string; words: string[] }> = [];
  for (const block of SH) {
    const lines = block.code.replace(/\\\n\s*/g, ' ').split('\n');
    lines.forEach((text, i) => {
      const command = text.replace(/\s#.*$/, '');
      for (const part of command.split(/&&|\|/)) {
        const match = /(?:^|\s)(?:npx\s+)?sessiond\s+(.*)$/.exec(part.trim());
        if (match === null || /^\s*(?:npx\s+)?sessiond\s/.exec(part.trim()) === null) continue;
        out.push({ where: `${block.file}:${block.line + i + 1}`, words: match[1]!.trim().split(/\s+/) });
      }
    });
  }
  return out;
}

function optionsOf(command: Command): Set<string> {
  const names = new Set<string>(['--help', '-h']);
  for (const option of command.options) {
    if (option.long !== undefined) names.add(option.long);
    if (option.short !== undefined) names.add(option.short);
    if (option.negate && option.long !== undefined) names.add(option.long);
  }
  return names;
}

describe('the docs’ samples', () => {
  it('finds the samples it checks', () => {
    expect(TS.length).toBeGreaterThan(0);
    expect(invocations().length).toBeGreaterThan(20);
  });

  it('type-checks every ```ts block', () => {
    const cache = join(REPO_ROOT, 'node_modules', '.cache');
    mkdirSync(cache, { recursive: true });
    const dir = mkdtempSync(join(cache, 'sessiond-docs-'));
    try {
      const files = TS.map((block, i) => {
        const path = join(dir, `sample-${i}.ts`);
        // Each sample is a module of its own (top-level await is allowed in one); a sample that is
        // a source file of sessiond (add-a-route.md) imports its neighbours as that file would.
        const code =
          block.at === undefined
            ? block.code
            : block.code.replace(
                /(from\s+')(\.{1,2}\/[^']+)'/g,
                (_, from: string, spec: string) => `${from}${join(REPO_ROOT, dirname(block.at!), spec)}'`,
              );
        writeFileSync(path, `${code}\nexport {};\n`);
        return { path, block };
      });
      const program = ts.createProgram(
        files.map((f) => f.path),
        {
          target: ts.ScriptTarget.ES2022,
          module: ts.ModuleKind.NodeNext,
          moduleResolution: ts.ModuleResolutionKind.NodeNext,
          lib: ['lib.es2023.d.ts'],
          types: ['node'],
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          allowImportingTsExtensions: true,
          baseUrl: REPO_ROOT,
          paths: { sessiond: ['src/index.ts'] },
        },
      );
      const problems = ts.getPreEmitDiagnostics(program).map((d) => {
        const file = files.find((f) => f.path === d.file?.fileName);
        const where =
          file === undefined
            ? (d.file?.fileName ?? '')
            : `${file.block.file}:${file.block.line + 1 + d.file!.getLineAndCharacterOfPosition(d.start ?? 0).line}`;
        return `${where}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
      });
      expect(problems).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('names in every `sessiond` line of a ```sh block a real command and only its flags', () => {
    const program = buildProgram();
    const global = optionsOf(program);
    global.add('--version').add('-V');
    const problems: string[] = [];
    for (const { where, words } of invocations()) {
      const first = words[0] ?? '';
      if (first.startsWith('-')) {
        for (const word of words)
          if (word.startsWith('-') && !global.has(word.replace(/[=[\]].*$/, '')))
            problems.push(`${where}: no global option ${word}`);
        continue;
      }
      const command = program.commands.find((c) => c.name() === first || c.aliases().includes(first));
      if (command === undefined) {
        problems.push(`${where}: no command "${first}"`);
        continue;
      }
      const known = optionsOf(command);
      for (const sub of command.commands) for (const name of optionsOf(sub)) known.add(name);
      for (const raw of words.slice(1)) {
        for (const word of raw.replace(/^\[+/, '').split('|')) {
          const flag = /^(--?[A-Za-z][\w-]*)/.exec(word)?.[1];
          if (flag !== undefined && !known.has(flag)) problems.push(`${where}: "${first}" has no option ${flag}`);
        }
      }
    }
    expect(problems).toEqual([]);
  });
});

describe('the docs’ commands that run offline', () => {
  let redis: RedisServer;
  let env: Record<string, string>;
  beforeAll(async () => {
    redis = await startRedis();
    env = {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      REDIS_URL: redis.url,
      SESSIOND_PREFIX: uniquePrefix('docs'),
    };
  }, 60_000);
  afterAll(async () => {
    await redis?.stop();
  });

  it.each([
    ['--version'],
    ['--help'],
    ['list'],
    ['list', '--json'],
    ['retry-policy', 'get', '--json'],
    ['policy', 'show', '--json'],
    ['deletions', '--json'],
  ])(
    'sessiond %s exits 0',
    async (...args) => {
      const result = await runCli(args, { env });
      expect(result.exitCode, result.stderr).toBe(0);
    },
    60_000,
  );
});
