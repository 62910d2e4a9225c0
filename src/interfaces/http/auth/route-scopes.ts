import type { Scope } from '../../../config/tokens.ts';

/** What a route needs: `public` (no token: the dashboard's shell, `/healthz`, login) or a scope. */
export type RouteScope = 'public' | Scope;
export const ROUTE_SCOPES: readonly RouteScope[] = ['public', 'read', 'write', 'admin'];

export interface RouteRule {
  method: string;
  /** The OpenAPI path template, e.g. `/api/sessions/{id}` (the audit log's `route`). */
  path: string;
  operationId: string;
  scope: RouteScope;
  pattern: RegExp;
  params: string[];
}

export interface RouteMatch {
  rule: RouteRule;
  params: Record<string, string>;
}

/** The extension each OpenAPI operation declares its scope with: the one place a route's scope is stated. */
export const SCOPE_KEY = 'x-sessiond-scope';

/**
 * The route table the guard enforces, read from the OpenAPI document: one rule
 * per operation, with the scope in its `x-sessiond-scope`. An operation
 * without a valid scope gets `admin` (fail closed); the route × scope test
 * fails on it.
 */
export function routeTable(doc: Record<string, unknown>): RouteRule[] {
  const paths = (doc.paths ?? {}) as Record<string, Record<string, Record<string, unknown>>>;
  const rules: RouteRule[] = [];
  for (const [path, ops] of Object.entries(paths)) {
    const params: string[] = [];
    const source = path
      .split('/')
      .map((part) => {
        const m = /^\{([A-Za-z0-9_]+)\}$/.exec(part);
        if (m === null) return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
        params.push(m[1] as string);
        return '([^/]+)';
      })
      .join('/');
    for (const [method, op] of Object.entries(ops)) {
      const declared = op[SCOPE_KEY];
      const scope = ROUTE_SCOPES.includes(declared as RouteScope) ? (declared as RouteScope) : 'admin';
      rules.push({
        method: method.toUpperCase(),
        path,
        operationId: String(op.operationId ?? `${method} ${path}`),
        scope,
        pattern: new RegExp(`^${source}$`),
        params,
      });
    }
  }
  return rules;
}

export function matchRoute(table: readonly RouteRule[], method: string, path: string): RouteMatch | null {
  const m = method === 'HEAD' ? 'GET' : method;
  for (const rule of table) {
    if (rule.method !== m) continue;
    const found = rule.pattern.exec(path);
    if (found === null) continue;
    const params: Record<string, string> = {};
    rule.params.forEach((name, i) => {
      try {
        params[name] = decodeURIComponent(found[i + 1] ?? '');
      } catch {
        params[name] = found[i + 1] ?? '';
      }
    });
    return { rule, params };
  }
  return null;
}
