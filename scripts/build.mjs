#!/usr/bin/env node
// `npm run build`: tsc (tsconfig.build.json) → dist/ with .d.ts and source maps, then the files the
// compiled code reads at run time next to it: the dashboard's assets (everything in
// src/interfaces/web/ that is not TypeScript), then the bundle of the CLI's fast commands in
// dist/cli/ (scripts/bundle-cli.mjs). A clean build: dist/ is removed first.
import { execFileSync } from 'node:child_process';
import { cpSync, readdirSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleCli } from './bundle-cli.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');
rmSync(dist, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { cwd: root, stdio: 'inherit' });

function copyAssets(dir) {
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) copyAssets(path);
    else if (!/\.[cm]?ts$/.test(entry)) cpSync(path, join(dist, relative(root, path)));
  }
}
copyAssets(join(root, 'src', 'interfaces', 'web'));
await bundleCli({ root, outdir: join(dist, 'cli') });
