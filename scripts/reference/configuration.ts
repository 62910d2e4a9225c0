/**
 * docs/reference/configuration.md from the config schema: every field of ConfigSchema (src/config/config.ts, the
 * deployment policy from src/policy/schema.ts, fleet limits from src/config/limits.ts) with its type and
 * range (the schema as JSON Schema), its default (the schema applied to `{}`), its environment variable
 * (src/config/raw.ts) and its description: the doc comment on the field in the schema's source, else the one on
 * the default it takes (src/config/defaults.ts).
 */
import { readFileSync } from 'node:fs';
import ts from 'typescript';
import { z } from 'zod';
import { ConfigSchema } from '../../src/config/config.ts';
import { formatDuration } from '../../src/config/duration.ts';
import { ENV_MAP } from '../../src/config/raw.ts';

type Json = Record<string, unknown>;

/** Where each schema's fields are declared: the const and the config path its fields sit under. */
const SOURCES: Array<{ file: string; roots: Record<string, string> }> = [
  { file: 'src/config/config.ts', roots: { ConfigSchema: '' } },
  {
    file: 'src/policy/schema.ts',
    roots: {
      PolicySchema: 'policy',
      PERMISSION: 'policy.permissions.<agent>',
      APPROVALS: 'policy.approvals',
      AUTO_ALLOW_RULE: 'policy.approvals.autoAllow[]',
      NETWORK: 'policy.network',
      NETWORK_AGENT: 'policy.network.agents.<agent>',
    },
  },
  { file: 'src/config/limits.ts', roots: { LimitSchema: 'limits[]' } },
];

/** Defaults that depend on the machine: said in words. */
const MACHINE_DEFAULTS: Record<string, string> = {
  stateDir: '`$XDG_STATE_HOME/sessiond`, else `~/.local/state/sessiond`',
  workspace: 'the directory sessiond starts in',
};

interface Field {
  doc: string;
  /** The field's schema call, e.g. `duration(1000, 600_000).default(WORKER_DEFAULTS.leaseTtlMs)`. */
  source: string;
}

function jsDoc(node: ts.Node): string {
  const docs = ts.getJSDocCommentsAndTags(node).filter(ts.isJSDoc);
  return docs
    .map((d) => ts.getTextOfJSDocComment(d.comment) ?? '')
    .join(' ')
    .replace(/\s+/g, ' ')
    .trim();
}

/** The doc comment of each property of each exported object in `file` (`WORKER_DEFAULTS.leaseTtlMs`, `SHUTDOWN_GRACE_MS`). */
function constantDocs(file: string): Map<string, string> {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
  const docs = new Map<string, string>();
  source.forEachChild((statement) => {
    if (!ts.isVariableStatement(statement)) return;
    for (const decl of statement.declarationList.declarations) {
      if (!ts.isIdentifier(decl.name)) continue;
      const name = decl.name.text;
      docs.set(name, jsDoc(statement));
      let init = decl.initializer;
      if (init !== undefined && ts.isAsExpression(init)) init = init.expression;
      if (init !== undefined && ts.isObjectLiteralExpression(init))
        for (const p of init.properties)
          if (ts.isPropertyAssignment(p) && ts.isIdentifier(p.name)) docs.set(`${name}.${p.name.text}`, jsDoc(p));
    }
  });
  return docs;
}

/** Every field declared under the SOURCES roots, by config path. */
function schemaFields(): Map<string, Field> {
  const fields = new Map<string, Field>();
  for (const { file, roots } of SOURCES) {
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
    const visit = (node: ts.Node, prefix: string): void => {
      if (ts.isPropertyAssignment(node) && ts.isIdentifier(node.name)) {
        const path = prefix === '' ? node.name.text : `${prefix}.${node.name.text}`;
        fields.set(path, { doc: jsDoc(node), source: node.initializer.getText(source) });
        node.initializer.forEachChild((child) => visit(child, path));
        return;
      }
      node.forEachChild((child) => visit(child, prefix));
    };
    source.forEachChild((statement) => {
      if (!ts.isVariableStatement(statement)) return;
      for (const decl of statement.declarationList.declarations)
        if (ts.isIdentifier(decl.name) && decl.name.text in roots && decl.initializer !== undefined)
          visit(decl.initializer, roots[decl.name.text] as string);
    });
  }
  return fields;
}

/** Environment variables by config path: ENV_MAP, and the JSON ones rawConfig reads itself. */
function envVars(): Map<string, string> {
  const env = new Map(Object.entries(ENV_MAP).map(([name, path]) => [path, name]));
  const raw = readFileSync('src/config/raw.ts', 'utf8');
  for (const m of raw.matchAll(/if \(env\.(SESSIOND_[A-Z_]+) !== undefined[\s\S]*?setPath\(\s*raw,\s*'([^']+)'/g))
    if (!env.has(m[2] as string)) env.set(m[2] as string, m[1] as string);
  return env;
}

function valueAt(value: unknown, path: string): unknown {
  let node = value;
  for (const part of path.split('.'))
    node = node !== null && typeof node === 'object' && !Array.isArray(node) ? (node as Json)[part] : undefined;
  return node;
}

const cell = (text: string): string => text.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');

function typeOf(schema: Json, duration: boolean): string {
  const range = (min: unknown, max: unknown, show: (n: number) => string): string =>
    min === undefined && max === undefined
      ? ''
      : ` ${min === undefined ? '…' : show(min as number)}–${max === undefined ? '…' : show(max as number)}`;
  if (duration) return `duration${range(schema.minimum, schema.maximum, formatDuration)}`;
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  if (Array.isArray(schema.enum)) return schema.enum.map((v) => JSON.stringify(v)).join(' | ');
  if (Array.isArray(schema.anyOf)) return (schema.anyOf as Json[]).map((s) => typeOf(s, false)).join(' | ');
  const type = Array.isArray(schema.type) ? (schema.type as string[]).join(' or ') : String(schema.type ?? 'any');
  if (type === 'array')
    return `${typeOf((schema.items ?? {}) as Json, false)}[]${schema.maxItems === undefined ? '' : ` (at most ${String(schema.maxItems)})`}`;
  if (type === 'object' && schema.properties === undefined) return 'object';
  const chars =
    schema.minLength !== undefined || schema.maxLength !== undefined
      ? ` ${String(schema.minLength ?? 0)}–${String(schema.maxLength ?? '…')} chars`
      : '';
  return `${type}${range(schema.minimum, schema.maximum, String)}${chars}${typeof schema.pattern === 'string' ? ` \`${schema.pattern}\`` : ''}`;
}

interface Row {
  path: string;
  type: string;
  default: string;
  env: string;
  doc: string;
}

export function configurationReference(): string {
  const json = z.toJSONSchema(ConfigSchema, { io: 'input', unrepresentable: 'any' }) as Json;
  const defaults = ConfigSchema.parse({}) as Json;
  const fields = schemaFields();
  const constants = constantDocs('src/config/defaults.ts');
  const env = envVars();
  const rows: Row[] = [];
  const walk = (schema: Json, path: string, defaultsAt: string | null): void => {
    const field = fields.get(path);
    const properties = schema.properties as Record<string, Json> | undefined;
    const record = schema.additionalProperties as Json | undefined;
    const items = schema.items as Json | undefined;
    if (path !== '' && properties === undefined) {
      const duration = field?.source.startsWith('duration(') === true;
      // The doc comment on the field, else the one on the default constant it takes (`.default(WORKER_DEFAULTS.pollMs)`).
      const constant = /\.default\(([A-Z_]+(?:\.[A-Za-z]+)?)\)/.exec(field?.source ?? '')?.[1];
      const doc = (field?.doc || (constant === undefined ? '' : (constants.get(constant) ?? '')))
        .replace(/@default.*$/, '')
        .trim();
      const value = defaultsAt === null ? undefined : valueAt(defaults, defaultsAt);
      const shown =
        MACHINE_DEFAULTS[path] ??
        (value === undefined
          ? ''
          : duration && typeof value === 'number'
            ? `\`${formatDuration(value)}\``
            : `\`${JSON.stringify(value)}\``);
      rows.push({
        path,
        type: typeOf(schema, duration),
        default: shown,
        env: env.has(path) ? `\`${env.get(path) as string}\`` : '',
        doc,
      });
    }
    if (path !== '' && (properties !== undefined || record !== undefined || items !== undefined) && field?.doc) {
      if (properties !== undefined)
        rows.push({
          path,
          type: 'object',
          default: '',
          env: env.has(path) ? `\`${env.get(path) as string}\`` : '',
          doc: field.doc,
        });
    }
    const at = (name: string): string => (path === '' ? name : `${path}.${name}`);
    for (const [name, child] of Object.entries(properties ?? {}))
      walk(child, at(name), defaultsAt === null ? null : at(name));
    if (record !== undefined && typeof record === 'object' && record.properties !== undefined)
      walk(record, at('<agent>'), null);
    if (items !== undefined && items.properties !== undefined) walk(items, `${path}[]`, null);
  };
  walk(json, '', '');
  const out = [
    '# Configuration reference',
    '',
    '<!-- Generated by `npm run docs:reference` from the config schema (src/config/config.ts, src/policy/schema.ts, src/config/limits.ts) and its defaults (src/config/defaults.ts). Do not edit: `npm run check` fails when this page and the schema differ. -->',
    '',
    'sessiond reads its configuration once at start, from defaults ← the file named by `SESSIOND_CONFIG` (JSON, the paths below as nested keys) ← environment variables ← command-line flags, and refuses to start on a bad value with an error naming the field and where it came from.',
    'Durations are written `500ms`, `2s`, `1.5m`, `1h`, `30d`, or a whole number of milliseconds. `<agent>` stands for an agent name; `[]` for each item of a list.',
    '',
    '| Path | Type | Default | Environment | Description |',
    '| --- | --- | --- | --- | --- |',
    ...rows.map((r) => `| \`${r.path}\` | ${cell(r.type)} | ${cell(r.default)} | ${r.env} | ${cell(r.doc)} |`),
  ];
  return `${out.join('\n')}\n`;
}
