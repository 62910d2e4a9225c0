import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Metafile } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleCli } from '../../../scripts/bundle-cli.mjs';
import { REPO_ROOT } from '../../support/pi-env.ts';

// What each command of the package's CLI bundle (scripts/bundle-cli.mjs) loads, from esbuild's
// account of the chunks: a read-only command must not evaluate the runtime (BullMQ, zod, the agents),
// whose chunk is most of a command's start (`npm run bench -- cli` measures it). bundle.test.ts (in
// `npm run test:long`) drives the same bundle's commands against a real deployment.
let outdir: string;
let metafile: Metafile;

beforeAll(async () => {
  const cache = join(REPO_ROOT, 'node_modules', '.cache');
  mkdirSync(cache, { recursive: true });
  outdir = mkdtempSync(join(cache, 'sessiond-cli-graph-'));
  ({ metafile } = await bundleCli({ root: REPO_ROOT, outdir }));
}, 120_000);

afterAll(() => {
  if (outdir !== undefined) rmSync(outdir, { recursive: true, force: true });
});

/**
 * The source files a command's run evaluates: the chunk of its module, what that imports statically,
 * and each chunk its action loads through a split point (`also`), with what those import statically.
 */
function loadedInputs(entry: RegExp, also: RegExp[]): string[] {
  const outputs = Object.entries(metafile.outputs).filter(([path]) => path.endsWith('.js'));
  const chunkOf = (source: RegExp): string => {
    const found = outputs.find(([, output]) => Object.keys(output.inputs).some((input) => source.test(input)));
    if (found === undefined) throw new Error(`no chunk holds ${String(source)}`);
    return found[0];
  };
  const seen = new Set<string>();
  const visit = (path: string): void => {
    if (seen.has(path)) return;
    seen.add(path);
    for (const imported of metafile.outputs[path]!.imports)
      if (imported.kind === 'import-statement' && imported.external !== true) visit(imported.path);
  };
  for (const source of [entry, ...also]) visit(chunkOf(source));
  return [...seen].flatMap((path) => Object.keys(metafile.outputs[path]!.inputs));
}

const RUNTIME = /node_modules\/(bullmq|zod|xstate|execa|@agentclientprotocol)\/|src\/agents\/|src\/runtime\/queue\.ts$/;

describe("the CLI bundle's split points", () => {
  it('inspect, list and watch load the reads alone: no BullMQ, no zod, no agents, no execa', () => {
    for (const command of ['inspect', 'list', 'watch']) {
      const inputs = loadedInputs(new RegExp(`src/interfaces/cli/commands/${command}\\.ts$`), [
        /src\/interfaces\/cli\/reader-context\.ts$/,
      ]);
      expect(inputs, command).toContainEqual(expect.stringMatching(/src\/runtime\/session-reads\.ts$/));
      expect(inputs, command).toContainEqual(expect.stringMatching(/node_modules\/ioredis\//));
      expect(
        inputs.filter((input) => RUNTIME.test(input)),
        command,
      ).toEqual([]);
    }
  });

  it('a command that writes loads the runtime through its client', () => {
    const inputs = loadedInputs(/src\/interfaces\/cli\/commands\/enqueue\.ts$/, [/src\/interfaces\/cli\/context\.ts$/]);
    expect(inputs).toContainEqual(expect.stringMatching(/node_modules\/bullmq\//));
    expect(inputs).toContainEqual(expect.stringMatching(/src\/runtime\/queue\.ts$/));
  });
});
