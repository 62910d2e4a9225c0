/**
 * The generated reference pages: docs/reference/http.md (from the OpenAPI document),
 * docs/reference/configuration.md (from the config schema) and docs/reference/messages.md (from the message contract).
 *
 *   npm run docs:reference            writes them
 *   npm run docs:reference -- --check  fails (exit 1) when a checked-in page differs from what the code says
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { configurationReference } from './reference/configuration.ts';
import { httpReference } from './reference/http.ts';
import { messagesReference } from './reference/messages.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
process.chdir(ROOT);

const PAGES: Record<string, () => string> = {
  'docs/reference/http.md': httpReference,
  'docs/reference/configuration.md': configurationReference,
  'docs/reference/messages.md': messagesReference,
};

const check = process.argv.includes('--check');
let stale = 0;
for (const [file, render] of Object.entries(PAGES)) {
  const text = render();
  let current: string | null = null;
  try {
    current = readFileSync(file, 'utf8');
  } catch {
    current = null;
  }
  if (current === text) continue;
  if (check) {
    stale += 1;
    process.stderr.write(
      `${file} is out of date with the code: run \`npm run docs:reference\` and commit the result\n`,
    );
  } else {
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, text);
    process.stdout.write(`wrote ${file}\n`);
  }
}
process.exitCode = stale === 0 ? 0 : 1;
