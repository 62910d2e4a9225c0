// @ts-check
// DOM helpers and small formatters of the dashboard. No state.

const SVG_NS = 'http://www.w3.org/2000/svg';

/**
 * @typedef {string | number | Node | null | undefined | false} Child
 * @typedef {Child | Array<Child | Child[]>} Children
 * @typedef {Record<string, unknown>} Attrs
 */

/**
 * h('div', { class: 'x', 'data-testid': 'y', onclick: fn }, child, 'text')
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Attrs} [attrs]
 * @param {...Children} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/**
 * @param {string} tag
 * @param {Attrs} [attrs]
 * @param {...Children} children
 * @returns {SVGElement}
 */
export function s(tag, attrs = {}, ...children) {
  const el = /** @type {SVGElement} */ (document.createElementNS(SVG_NS, tag));
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/**
 * @param {Element} el
 * @param {Attrs} attrs
 */
function setAttrs(el, attrs) {
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function')
      el.addEventListener(key.slice(2), /** @type {EventListener} */ (value));
    else if (key === 'text') el.textContent = String(value);
    else el.setAttribute(key, value === true ? '' : String(value));
  }
}

/**
 * @param {Element} el
 * @param {Children[]} children
 */
function append(el, children) {
  for (const child of /** @type {Child[]} */ (children.flat(Infinity))) {
    if (child === undefined || child === null || child === false) continue;
    el.append(typeof child === 'string' || typeof child === 'number' ? document.createTextNode(String(child)) : child);
  }
}

/**
 * Replaces the children of `el`, skipping null/false and flattening arrays (unlike replaceChildren).
 * @template {Element} E
 * @param {E} el
 * @param {...Children} children
 * @returns {E}
 */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** @param {string} state */
export function badge(state) {
  return h('span', { class: `badge state-${state}`, 'data-testid': 'state-badge', 'data-state': state }, state);
}

/**
 * A labelled form field with a slot for its error (`[data-error-for=name]`).
 * @param {string} label
 * @param {string} name
 * @param {HTMLElement} input
 * @param {string} [hint]
 */
export function field(label, name, input, hint) {
  return h(
    'label',
    { class: 'field' },
    h('span', {}, label),
    input,
    hint ? h('small', { class: 'muted' }, hint) : null,
    h('small', { class: 'field-error', 'data-error-for': name }),
  );
}

/** @param {number | null | undefined} value */
export function ms(value) {
  if (value === null || value === undefined) return '–';
  if (value < 1000) return `${Math.round(value)} ms`;
  if (value < 60_000) return `${(value / 1000).toFixed(value < 10_000 ? 1 : 0)} s`;
  return `${Math.floor(value / 60_000)} min ${Math.round((value % 60_000) / 1000)} s`;
}

/** @param {number | null | undefined} at */
export function ago(at) {
  if (!at) return '–';
  const d = Date.now() - at;
  return d < 2000 ? 'just now' : `${ms(d)} ago`;
}

/** @param {number | null | undefined} at */
export function clock(at) {
  return at ? new Date(at).toLocaleTimeString() : '–';
}

/**
 * @param {unknown} value
 * @param {number} [max]
 */
export function preview(value, max = 300) {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  if (text === undefined) return '';
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

/**
 * Runs `fn` now and every `everyMs` after it settles; returns the stop function.
 * @param {() => Promise<void> | void} fn
 * @param {number} everyMs
 */
export function poll(fn, everyMs) {
  let stopped = false;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  const tick = async () => {
    try {
      await fn();
    } catch {
      // the next tick tries again
    }
    if (!stopped) timer = setTimeout(tick, everyMs);
  };
  void tick();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
