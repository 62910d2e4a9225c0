// @ts-check
// The retry-policy editor (the global policy or one session's).

import { api, can, clearIssues, showIssues, showOk } from './api.js';
import { field, h } from './dom.js';
import { CATEGORIES } from './vocabulary.js';

/** @type {Array<[string, string, string]>} */
const POLICY_NUMBERS = [
  ['maxAttempts', 'max attempts', 'attempts in total, 1–100'],
  ['initialDelayMs', 'initial delay (ms)', '0–3,600,000'],
  ['multiplier', 'multiplier', '1–10'],
  ['maxDelayMs', 'max delay (ms)', '≥ initial delay'],
  ['maxRetryAfterMs', 'max Retry-After (ms)', '0–86,400,000'],
  ['maxTurnMs', 'max turn time (ms)', '0 (none)–604,800,000'],
];

/**
 * A value typed in a text box: a number when it reads as one, else the text (the API says what is wrong).
 * @param {string} text
 */
export function typed(text) {
  const t = text.trim();
  return t !== '' && /^-?\d+(\.\d+)?$/.test(t) ? Number(t) : t;
}

/**
 * @param {{ path: string, title: string, allowReset: string | false }} options
 * @returns {{ panel: HTMLElement, load: () => Promise<void> }}
 */
export function policyEditor({ path, title, allowReset }) {
  /** @type {Record<string, unknown> | null} */
  let loaded = null;
  /** @type {Record<string, HTMLInputElement>} */
  const inputs = {};
  const sourceEl = h('span', { class: 'muted', 'data-testid': 'policy-source' });
  const form = h('form', { class: 'stack', 'data-testid': 'policy-form', novalidate: true });
  for (const [name] of POLICY_NUMBERS)
    inputs[name] = h('input', { type: 'text', name, inputmode: 'decimal', autocomplete: 'off' });
  const jitter = h('input', { type: 'text', name: 'jitter', autocomplete: 'off' });
  const enabled = h('input', { type: 'checkbox', name: 'enabled' });
  const honorRetryAfter = h('input', { type: 'checkbox', name: 'honorRetryAfter' });
  const categoryBoxes = CATEGORIES.map((c) => h('input', { type: 'checkbox', name: 'retryOn', value: c }));
  const input = (/** @type {string} */ name) => /** @type {HTMLInputElement} */ (inputs[name]);

  form.append(
    h(
      'div',
      { class: 'row' },
      POLICY_NUMBERS.slice(0, 3).map(([name, label, hint]) => field(label, name, input(name), hint)),
    ),
    h(
      'div',
      { class: 'row' },
      POLICY_NUMBERS.slice(3).map(([name, label, hint]) => field(label, name, input(name), hint)),
      field('jitter', 'jitter', jitter, "'none', 'full', 'equal' or 0–1"),
    ),
    h(
      'div',
      { class: 'row' },
      h(
        'label',
        { class: 'field checkbox' },
        enabled,
        'retries enabled',
        h('small', { class: 'field-error', 'data-error-for': 'enabled' }),
      ),
      h(
        'label',
        { class: 'field checkbox' },
        honorRetryAfter,
        'honor Retry-After',
        h('small', { class: 'field-error', 'data-error-for': 'honorRetryAfter' }),
      ),
    ),
    h(
      'div',
      { class: 'field' },
      h('span', {}, 'retry on'),
      h(
        'div',
        { class: 'categories' },
        categoryBoxes.map((box) => h('label', {}, box, box.value)),
      ),
      h('small', { class: 'field-error', 'data-error-for': 'retryOn' }),
    ),
    h('small', { class: 'field-error', 'data-error-for': 'policy' }),
    h(
      'div',
      { class: 'actions' },
      h('button', { type: 'submit', class: 'primary', 'data-testid': 'policy-save' }, 'Save retry policy'),
      allowReset
        ? h('button', { type: 'button', class: 'secondary', 'data-testid': 'policy-reset', onclick: reset }, allowReset)
        : null,
      h('span', { class: 'form-error' }),
      h('span', { class: 'form-ok', 'data-testid': 'policy-ok' }),
    ),
  );
  if (!can('admin')) {
    // Below admin the policy is shown, not edited.
    for (const el of form.querySelectorAll('input, button'))
      /** @type {HTMLInputElement | HTMLButtonElement} */ (el).disabled = true;
    form.querySelector('[data-testid="policy-save"]')?.remove();
    form.querySelector('[data-testid="policy-reset"]')?.remove();
  }
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void save();
  });

  /**
   * @param {Record<string, any>} policy
   * @param {string} source
   */
  function show(policy, source) {
    loaded = policy;
    for (const [name] of POLICY_NUMBERS) input(name).value = String(policy[name] ?? 0);
    jitter.value = String(policy.jitter);
    enabled.checked = policy.enabled;
    honorRetryAfter.checked = policy.honorRetryAfter;
    for (const box of categoryBoxes) box.checked = policy.retryOn.includes(box.value);
    sourceEl.textContent = `(${source})`;
  }

  function patch() {
    /** @type {Record<string, unknown>} */
    const out = {};
    for (const [name] of POLICY_NUMBERS) out[name] = typed(input(name).value);
    out.jitter = typed(jitter.value);
    out.enabled = enabled.checked;
    out.honorRetryAfter = honorRetryAfter.checked;
    out.retryOn = categoryBoxes.filter((b) => b.checked).map((b) => b.value);
    // Only what changed: a per-session policy keeps following nothing it was not told.
    const before = loaded;
    if (before)
      for (const key of Object.keys(out)) if (JSON.stringify(out[key]) === JSON.stringify(before[key])) delete out[key];
    return out;
  }

  async function load() {
    const result = await api('GET', path);
    if (result.ok) show(result.data.policy, result.data.source);
    else showIssues(form, result);
  }

  async function save() {
    const result = await api('PUT', path, patch());
    if (!result.ok) return showIssues(form, result);
    clearIssues(form);
    show(result.data.policy, result.data.source);
    showOk(form, 'saved');
  }

  async function reset() {
    const result = await api('DELETE', path);
    if (!result.ok) return showIssues(form, result);
    clearIssues(form);
    await load();
    showOk(form, 'reset');
  }

  const panel = h(
    'section',
    { class: 'panel', 'data-testid': 'policy-panel' },
    h('h2', {}, title, ' ', sourceEl),
    form,
  );
  void load();
  return { panel, load };
}
