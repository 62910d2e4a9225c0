import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ENV_MAP } from '../../src/config/raw.ts';
import { openApiDocument } from '../../src/interfaces/http/openapi.ts';
import { configurationReference } from '../../scripts/reference/configuration.ts';
import { httpReference } from '../../scripts/reference/http.ts';

const HTTP = 'docs/reference/http.md';
const CONFIGURATION = 'docs/reference/configuration.md';

describe('the generated reference pages', () => {
  it('are checked in as the code generates them (npm run docs:reference)', () => {
    expect(readFileSync(HTTP, 'utf8')).toBe(httpReference());
    expect(readFileSync(CONFIGURATION, 'utf8')).toBe(configurationReference());
  });

  it('the HTTP page has a section for every operation the server documents', () => {
    const page = readFileSync(HTTP, 'utf8');
    const paths = (openApiDocument() as { paths: Record<string, Record<string, { operationId: string }>> }).paths;
    const missing = Object.entries(paths).flatMap(([path, ops]) =>
      Object.entries(ops)
        .filter(
          ([method, op]) =>
            !page.includes(`### ${method.toUpperCase()} \`${path}\``) ||
            !page.includes(`Operation \`${op.operationId}\``),
        )
        .map(([method]) => `${method} ${path}`),
    );
    expect(missing).toEqual([]);
  });

  it('the configuration page names every environment variable of the configuration, on its field', () => {
    const page = readFileSync(CONFIGURATION, 'utf8');
    for (const [name, path] of Object.entries(ENV_MAP))
      expect(page, name).toMatch(
        new RegExp(`^\\| \`${path.replace(/[.[\]]/g, '\\$&')}\` \\|.*\\| \`${name}\` \\|`, 'm'),
      );
    for (const name of ['SESSIOND_POLICY', 'SESSIOND_AGENT_OPTIONS', 'SESSIOND_PI_ARGS', 'SESSIOND_AGENT_ENV'])
      expect(page, name).toContain(`\`${name}\``);
  });
});
