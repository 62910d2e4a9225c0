// @ts-check
// The HTTP API as the page uses it, and who is logged in. The page never holds a token: it logs
// in once (POST /api/login → an HttpOnly cookie the browser sends by itself), learns its scope
// from /api/whoami, and shows only what that scope allows.

/**
 * @typedef {{ name: string, scope: 'read' | 'write' | 'admin', via: string }} Principal
 * @typedef {{ ok: boolean, status: number, data: any }} ApiResult
 * @typedef {{ field: string, message: string }} Issue
 */

const RANK = { read: 1, write: 2, admin: 3 };

/** @type {Principal | null} `{name, scope, via}` once known; null when logged out. */
let me = null;
/** @type {() => void} */
let onLoggedOut = () => {};

export function principal() {
  return me;
}

/** @param {Principal | null} value */
export function setPrincipal(value) {
  me = value;
}

/** What the page does when the server says the login has gone (the shell routes to the login form). @param {() => void} fn */
export function whenLoggedOut(fn) {
  onLoggedOut = fn;
}

/** @param {'read' | 'write' | 'admin'} scope */
export function can(scope) {
  return me !== null && RANK[me.scope] >= RANK[scope];
}

/**
 * @param {string} method
 * @param {string} path
 * @param {unknown} [body]
 * @returns {Promise<ApiResult>}
 */
export async function api(method, path, body) {
  /** @type {Record<string, string>} */
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (error) {
    return {
      ok: false,
      status: 0,
      data: { error: `cannot reach the server: ${error instanceof Error ? error.message : String(error)}` },
    };
  }
  const data = await response.json().catch(() => null);
  // Logged out (or the login expired) while on a page: back to the login form.
  if (response.status === 401 && me !== null && path !== '/api/login') {
    me = null;
    onLoggedOut();
  }
  return { ok: response.ok, status: response.status, data };
}

/**
 * Shows the API's 400 `issues` at their fields (`[data-error-for=field]`); the rest at the form.
 * @param {HTMLFormElement} form
 * @param {ApiResult} result
 */
export function showIssues(form, result) {
  clearIssues(form);
  const formError = form.querySelector('.form-error');
  /** @type {Issue[]} */
  const issues = result.data?.issues ?? [];
  const leftover = [];
  for (const issue of issues) {
    const target = findErrorSlot(form, issue.field);
    if (target === null) {
      leftover.push(`${issue.field}: ${issue.message}`);
      continue;
    }
    target.textContent = target.textContent ? `${target.textContent}; ${issue.message}` : issue.message;
    target.closest('.field')?.classList.add('invalid');
  }
  if (formError) {
    const summary =
      issues.length === 0 ? (result.data?.error ?? `request failed (HTTP ${result.status})`) : leftover.join('; ');
    formError.textContent = summary;
  }
}

/**
 * @param {HTMLFormElement} form
 * @param {string} field
 */
function findErrorSlot(form, field) {
  const parts = String(field).split('.');
  for (let n = parts.length; n > 0; n--) {
    const slot = form.querySelector(`[data-error-for="${CSS.escape(parts.slice(0, n).join('.'))}"]`);
    if (slot) return slot;
  }
  return null;
}

/** @param {HTMLFormElement} form */
export function clearIssues(form) {
  for (const slot of form.querySelectorAll('[data-error-for]')) slot.textContent = '';
  for (const field of form.querySelectorAll('.field.invalid')) field.classList.remove('invalid');
  const formError = form.querySelector('.form-error');
  if (formError) formError.textContent = '';
  const ok = form.querySelector('.form-ok');
  if (ok) ok.textContent = '';
}

/** Sets the text of a form's `.form-ok` slot. @param {HTMLFormElement} form @param {string} text */
export function showOk(form, text) {
  const ok = form.querySelector('.form-ok');
  if (ok) ok.textContent = text;
}
