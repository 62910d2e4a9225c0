#!/usr/bin/env node
// The mechanical rewrite of issue 14 ("Runtime's internals private"), for code written before it:
// every `<expr ending in runtime/Runtime>.<part>` (part: keys, redis, store, queue, policies,
// approvals, limits, fleetLimits) becomes `internals(<expr>).<part>`, and the file gets
// `import { internals } from '<relative>/src/runtime/internals.ts'`. Files: the arguments, or
// every .ts file under src/ test/ bench/ chaos/ except src/runtime/runtime.ts and internals.ts.
// The CLI, HTTP API and dashboard should use public methods instead (README "Use it from
// TypeScript"); run `npm run typecheck` after it for what it cannot see (destructuring, other names).
import { readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const PARTS = 'keys|redis|store|queue|policies|approvals|limits|fleetLimits';
const ACCESS = new RegExp(`(?<![\\w$#.])((?:#?[A-Za-z_$][\\w$]*\\.)*#?[\\w$]*[rR]untime)\\.(${PARTS})\\b(?!\\s*[:(=](?!=))`, 'g');
// `const { redis, store } = h.runtime;` → `const { redis, store } = internals(h.runtime);`
const DESTRUCTURE = new RegExp(`(const\\s*\\{\\s*(?:(?:${PARTS})\\s*,\\s*)*(?:${PARTS})\\s*\\}\\s*=\\s*)((?:[A-Za-z_$][\\w$]*\\.)*[\\w$]*[rR]untime)\\s*;`, 'g');
const SKIP = new Set(['src/runtime/runtime.ts', 'src/runtime/internals.ts']);

function walk(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (name === 'node_modules' || name === 'dist') return [];
    return statSync(path).isDirectory() ? walk(path) : /\.ts$/.test(name) ? [path] : [];
  });
}

const files = process.argv.length > 2 ? process.argv.slice(2).map((f) => join(process.cwd(), f)) : ['src', 'test', 'bench', 'chaos'].flatMap((d) => walk(join(root, d)));
for (const file of files) {
  if (SKIP.has(relative(root, file))) continue;
  const text = readFileSync(file, 'utf8');
  // `this.runtime` inside a class that is not a Runtime is rewritten too: it is one in this tree.
  const out = text.replace(ACCESS, (_all, target, part) => `internals(${target}).${part}`).replace(DESTRUCTURE, (_all, head, target) => `${head}internals(${target});`);
  if (out === text) continue;
  let spec = relative(dirname(file), join(root, 'src/runtime/internals.ts'));
  if (!spec.startsWith('.')) spec = `./${spec}`;
  const line = `import { internals } from '${spec}';\n`;
  const withImport = out.includes(line) ? out : insertImport(out, line);
  writeFileSync(file, withImport);
  console.log(relative(root, file));
}

/** After the file's last top-level import statement. */
function insertImport(text, line) {
  const re = /^import[\s\S]*?from\s+['"][^'"]+['"];?\n/gm;
  let end = 0;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) end = m.index + m[0].length;
  return text.slice(0, end) + line + text.slice(end);
}
