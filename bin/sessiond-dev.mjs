#!/usr/bin/env node
// The development entry: what src/ says now, never a stale build, so the tests, benchmarks and chaos
// run the sources (bin/sessiond.mjs runs the compiled dist/). Not part of the package.
//
// The sources are bundled as the package's CLI is (scripts/bundle-cli.mjs), into a cache keyed by
// the content of every source file: the first run after a change builds it (esbuild, about a
// second), every other run imports it, which starts much faster than compiling each module through
// tsx. Concurrent first runs each build into a directory of their own; the first rename wins.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

function hashTree(hash, dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) hashTree(hash, path);
    else if (/\.[cm]?[jt]s$/.test(entry.name)) hash.update(path).update(readFileSync(path));
  }
}

const hash = createHash('sha256');
for (const dir of ['src', 'machines']) hashTree(hash, join(root, dir));
for (const file of ['scripts/bundle-cli.mjs', 'package-lock.json']) hash.update(readFileSync(join(root, file)));
const cache = join(root, 'node_modules', '.cache', 'sessiond-dev');
const outdir = join(cache, hash.digest('hex').slice(0, 16));
if (!existsSync(join(outdir, 'main.js'))) {
  const { bundleCli } = await import('../scripts/bundle-cli.mjs');
  mkdirSync(cache, { recursive: true });
  const building = `${outdir}.${process.pid}`;
  await bundleCli({ root, outdir: building, webDir: join(root, 'src', 'interfaces', 'web') });
  try {
    renameSync(building, outdir);
  } catch (error) {
    // Another run renamed its build first: use that one.
    if (!existsSync(join(outdir, 'main.js'))) throw error;
    rmSync(building, { recursive: true, force: true });
  }
  // Builds of earlier sources go once nobody can be starting from them (10 minutes): the cache holds
  // the builds of the last few minutes, not one per edit ever made.
  // Another run may be removing the same old build: one gone meanwhile is skipped.
  for (const entry of readdirSync(cache)) {
    const path = join(cache, entry);
    const built = statSync(path, { throwIfNoEntry: false });
    if (path !== outdir && built !== undefined && Date.now() - built.mtimeMs > 600_000)
      rmSync(path, { recursive: true, force: true });
  }
}
const { runFast } = await import(pathToFileURL(join(outdir, 'fast.js')).href);
const code =
  (await runFast(process.argv)) ??
  (await (await import(pathToFileURL(join(outdir, 'main.js')).href)).main(process.argv));
// Pipes and files are written synchronously on POSIX, so nothing printed is lost by exiting here;
// exiting explicitly keeps a lingering handle (a Redis reconnect timer…) from holding the process.
process.exit(code);
