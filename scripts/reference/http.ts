/**
 * docs/reference/http.md from the OpenAPI document (src/interfaces/http/openapi.ts), which is assembled from the
 * routes' own declarations: nothing here is written by hand but the page's frame.
 */
import { openApiDocument } from '../../src/interfaces/http/openapi.ts';
import { SCOPE_KEY } from '../../src/interfaces/http/auth/route-scopes.ts';

type Json = Record<string, unknown>;

interface Operation {
  operationId: string;
  tags: string[];
  summary: string;
  description?: string;
  security?: Json[];
  parameters?: Array<{ name: string; in: string; required?: boolean; description?: string; schema?: Json }>;
  requestBody?: {
    required: boolean;
    content: Record<string, { schema: Json; examples?: Record<string, { summary: string; value: unknown }> }>;
  };
  responses: Record<string, { description: string; content?: Record<string, { schema: Json }> }>;
  [SCOPE_KEY]: string;
}

/** One line of Markdown table cell: pipes escaped, newlines folded. */
const cell = (text: string): string => text.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');
const anchor = (name: string): string => name.toLowerCase().replace(/[^a-z0-9]+/g, '-');

/** A JSON Schema in a few words: `integer 1–1000`, `"allow" \| "deny"`, `string[]`, a link to a component. */
export function typeOf(schema: Json | undefined): string {
  if (schema === undefined || Object.keys(schema).length === 0) return 'any';
  if (typeof schema.$ref === 'string') {
    const name = schema.$ref.split('/').at(-1) as string;
    return `[${name}](#${anchor(name)})`;
  }
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  if (Array.isArray(schema.enum)) return schema.enum.map((v) => JSON.stringify(v)).join(' | ');
  for (const key of ['anyOf', 'oneOf'] as const)
    if (Array.isArray(schema[key])) return (schema[key] as Json[]).map(typeOf).join(' | ');
  const types = Array.isArray(schema.type)
    ? (schema.type as string[])
    : typeof schema.type === 'string'
      ? [schema.type]
      : [];
  const main = types.find((t) => t !== 'null');
  let text: string;
  if (main === 'array') text = `${typeOf(schema.items as Json | undefined)}[]`;
  else if (
    main === 'object' &&
    schema.additionalProperties !== undefined &&
    schema.additionalProperties !== false &&
    schema.properties === undefined
  )
    text = `map of ${typeOf(schema.additionalProperties as Json)}`;
  else text = main ?? 'any';
  const range = [
    schema.minimum !== undefined || schema.maximum !== undefined
      ? `${String(schema.minimum ?? '…')}–${String(schema.maximum ?? '…')}`
      : '',
    schema.minLength !== undefined || schema.maxLength !== undefined
      ? `${String(schema.minLength ?? 0)}–${String(schema.maxLength ?? '…')} chars`
      : '',
    schema.maxItems !== undefined ? `at most ${String(schema.maxItems)}` : '',
    typeof schema.pattern === 'string' ? `\`${schema.pattern}\`` : '',
  ].filter(Boolean);
  return `${text}${range.length > 0 ? ` ${range.join(', ')}` : ''}${types.includes('null') ? ' or null' : ''}`;
}

/** The fields of an object schema, one row each (nested objects as `a.b`). */
function fieldRows(schema: Json, prefix = ''): string[] {
  const properties = (schema.properties ?? {}) as Record<string, Json>;
  const required = new Set((schema.required ?? []) as string[]);
  return Object.entries(properties).flatMap(([name, field]) => {
    const path = `${prefix}${name}`;
    const row = `| \`${path}\` | ${cell(typeOf(field))} | ${required.has(name) ? 'yes' : ''} | ${cell(String(field.description ?? ''))} |`;
    const nested = field.type === 'object' && field.properties !== undefined ? fieldRows(field, `${path}.`) : [];
    return [row, ...nested];
  });
}

function fieldTable(schema: Json): string[] {
  const rows = fieldRows(schema);
  return rows.length === 0
    ? [`\`${typeOf(schema)}\``]
    : ['| Field | Type | Required | Description |', '| --- | --- | --- | --- |', ...rows];
}

function operation(method: string, path: string, op: Operation): string[] {
  const out = [`### ${method.toUpperCase()} \`${path}\``, '', `${op.summary}.`.replace(/\.\.$/, '.'), ''];
  if (op.description !== undefined) out.push(op.description, '');
  const tickets = (op.security ?? []).some((s) => 'streamTicket' in s);
  const scope = op[SCOPE_KEY];
  out.push(
    `Operation \`${op.operationId}\` · scope **${scope}**${scope === 'public' ? ' (no credential)' : ''}${tickets ? ' · also a stream ticket (`?ticket=`)' : ''}`,
    '',
  );
  if (op.parameters !== undefined && op.parameters.length > 0) {
    out.push('| Parameter | In | Type | Required | Description |', '| --- | --- | --- | --- | --- |');
    for (const p of op.parameters)
      out.push(
        `| \`${p.name}\` | ${p.in} | ${cell(typeOf(p.schema))} | ${p.required === true ? 'yes' : ''} | ${cell(p.description ?? '')} |`,
      );
    out.push('');
  }
  if (op.requestBody !== undefined) {
    const [type, body] = Object.entries(op.requestBody.content)[0] as [
      string,
      { schema: Json; examples?: Record<string, { summary: string; value: unknown }> },
    ];
    out.push(
      `Request body (\`${type}\`, ${op.requestBody.required ? 'required' : 'optional'}):`,
      '',
      ...fieldTable(body.schema),
      '',
    );
    for (const example of Object.values(body.examples ?? {}))
      out.push(`Example, ${example.summary}:`, '', '```json', JSON.stringify(example.value), '```', '');
  }
  out.push('| Status | Answer |', '| --- | --- |');
  for (const [status, response] of Object.entries(op.responses)) {
    const content = Object.entries(response.content ?? {})[0];
    const what =
      content === undefined
        ? ''
        : ` (${content[0] === 'application/json' ? cell(typeOf(content[1].schema)) : `\`${content[0]}\``})`;
    out.push(`| ${status} | ${cell(response.description)}${what} |`);
  }
  out.push('');
  return out;
}

export function httpReference(): string {
  const doc = openApiDocument() as {
    info: { description: string };
    tags: Array<{ name: string }>;
    paths: Record<string, Record<string, Operation>>;
    components: { schemas: Record<string, Json> };
  };
  const byTag = new Map<string, Array<[string, string, Operation]>>();
  for (const [path, ops] of Object.entries(doc.paths))
    for (const [method, op] of Object.entries(ops)) {
      const tag = op.tags[0] ?? 'other';
      byTag.set(tag, [...(byTag.get(tag) ?? []), [method, path, op]]);
    }
  const out = [
    '# HTTP API reference',
    '',
    '<!-- Generated by `npm run docs:reference` from the OpenAPI document (src/interfaces/http/openapi.ts, assembled from the routes under src/interfaces/http/). Do not edit: `npm run check` fails when this page and the routes differ. -->',
    '',
    doc.info.description,
    '',
    'The server serves this document itself at `GET /openapi.json`. Scopes: `read` ⊂ `write` ⊂ `admin`; a route that needs a scope also answers 401 (no valid credential) and 403 (scope too low).',
    '',
  ];
  for (const [tag, ops] of byTag) {
    out.push(`## ${tag}`, '');
    for (const [method, path, op] of ops) out.push(...operation(method, path, op));
  }
  out.push('## Schemas', '');
  for (const [name, schema] of Object.entries(doc.components.schemas)) {
    out.push(`### ${name}`, '');
    if (typeof schema.description === 'string') out.push(schema.description, '');
    out.push(...fieldTable(schema), '');
  }
  return `${out
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trimEnd()}\n`;
}
