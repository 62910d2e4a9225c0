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

/** The extension each OpenAPI operation shows its route's scope with (route.ts `operationOf`). */
export const SCOPE_KEY = 'x-sessiond-scope';

/** What the guard needs of a declared route (route.ts `Route`): its method, path template, operationId and scope. */
export interface ScopedRoute {
  spec: { method: string; path: string; operationId: string; scope: RouteScope };
}

/**
 * The route table the guard enforces, from the routes' own declarations (the scope each `defineRoute` states,
 * the same one the OpenAPI document shows): one rule per route, its path template as a pattern.
 */
export function routeTable(routes: readonly ScopedRoute[]): RouteRule[] {
  return routes.map(({ spec: { method, path, operationId, scope } }) => {
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
    return { method: method.toUpperCase(), path, operationId, scope, pattern: new RegExp(`^${source}$`), params };
  });
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
        // Not an error here: a segment with a malformed %-escape is kept as sent, not decoded.
        params[name] = found[i + 1] ?? '';
      }
    });
    return { rule, params };
  }
  return null;
}
