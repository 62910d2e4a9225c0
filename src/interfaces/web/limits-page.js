// @ts-check
// The fleet limits (GET /api/limits): each rule, what it matches, its caps, what is held and waiting under it
// now, its keys' cooldowns, and paused dispatch. The rules are the operator's (SESSIOND_LIMITS or `limits` in
// the config file): the API does not change them; admin pauses and resumes dispatch, fleet-wide or per limit.

import { api, can } from './api.js';
import { clock, fill, h, poll } from './dom.js';

/**
 * @typedef {{ name: string, key: string, inUse: number, waiting: number, cooldownUntil: number | null, paused: boolean }} LimitKey
 * @typedef {{ name: string, match: Record<string, string>, maxConcurrent: number | null, maxStartsPerMinute: number | null,
 *   maxTokensPerMinute: number | null, paused: boolean, inUse: number, waiting: number, keys: LimitKey[] }} Limit
 */

/**
 * @param {HTMLElement} main
 * @returns {() => void}
 */
export function limitsPage(main) {
  const fleet = h('div', { class: 'fleet-row', 'data-testid': 'dispatch-status' });
  const body = h('tbody', { 'data-testid': 'limits-body' });
  const none = h(
    'p',
    { class: 'muted', 'data-testid': 'no-limits', hidden: true },
    'This deployment has no fleet limits: attempts start as soon as a worker has a free slot. The operator sets them in ',
    h('code', {}, 'SESSIOND_LIMITS'),
    ' or ',
    h('code', {}, 'limits'),
    ' in the config file.',
  );
  const note = h('span', { class: 'form-ok', 'data-testid': 'limits-note' });
  /** Errors of the last action, by limit name ('' for the fleet), shown in its row. @type {Map<string, string>} */
  const errors = new Map();

  fill(
    main,
    h(
      'section',
      { class: 'panel', 'data-testid': 'limits-page' },
      h('h2', {}, 'Fleet limits'),
      h(
        'p',
        { class: 'muted' },
        'How many attempts may run at once, start per minute or spend tokens per minute, per rule, across every worker. The rules are the configuration’s (',
        h('code', {}, 'SESSIOND_LIMITS'),
        '); pausing stops new attempts under a rule (running ones finish, cancels still work).',
      ),
      fleet,
      none,
      h(
        'div',
        { class: 'table-scroll' },
        h(
          'table',
          { 'data-testid': 'limits-table' },
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              ['limit', 'matches', 'at once', 'starts/min', 'tokens/min', 'in use', 'waiting', 'keys', ''].map((t) =>
                h('th', {}, t),
              ),
            ),
          ),
          body,
        ),
      ),
      h('div', { class: 'actions' }, note),
    ),
  );

  /**
   * @param {'pause' | 'resume'} action
   * @param {string | undefined} limit
   */
  async function act(action, limit) {
    const result = await api('POST', `/api/dispatch/${action}`, limit === undefined ? {} : { limit });
    errors.clear();
    note.textContent = '';
    if (!result.ok) {
      /** @type {Array<{ field: string, message: string }>} */
      const issues = result.data?.issues ?? [];
      // The API names the field it refuses (`limit`): said in that limit's row.
      errors.set(
        limit ?? '',
        issues.length > 0
          ? issues.map((i) => `${i.field}: ${i.message}`).join('; ')
          : (result.data?.error ?? `${action} failed (HTTP ${result.status})`),
      );
    } else
      note.textContent =
        action === 'pause'
          ? `paused: ${limit ?? 'all dispatch'}`
          : `resumed ${limit ?? 'dispatch'}: ${result.data.woken} waiting session${result.data.woken === 1 ? '' : 's'} woken`;
    body.dataset.key = '';
    fleet.dataset.key = '';
    await refresh();
  }

  /** @param {string} label @param {'pause' | 'resume'} action @param {string | undefined} limit */
  const button = (label, action, limit) =>
    can('admin')
      ? h(
          'button',
          {
            type: 'button',
            class: action === 'pause' ? 'danger' : 'secondary',
            'data-testid': `${action}-${limit === undefined ? 'dispatch' : 'limit'}`,
            onclick: () => void act(action, limit),
          },
          label,
        )
      : null;

  async function refresh() {
    const result = await api('GET', '/api/limits');
    if (!result.ok)
      return void fill(
        fleet,
        h('span', { class: 'form-error' }, result.data?.error ?? `cannot read the limits (HTTP ${result.status})`),
      );
    /** @type {{ paused: boolean, limits: Limit[] }} */
    const data = result.data;
    const fleetKey = JSON.stringify([data.paused, errors.get('')]);
    if (fleet.dataset.key !== fleetKey) {
      fleet.dataset.key = fleetKey;
      fill(
        fleet,
        data.paused
          ? h(
              'span',
              { class: 'paused', 'data-testid': 'dispatch-state', 'data-paused': 'true' },
              h('b', {}, 'Dispatch paused'),
              ': no attempt starts anywhere. ',
            )
          : h(
              'span',
              { 'data-testid': 'dispatch-state', 'data-paused': 'false' },
              h('b', {}, 'Dispatch running'),
              ': attempts start as the limits allow. ',
            ),
        data.paused ? button('Resume dispatch', 'resume', undefined) : button('Pause all dispatch', 'pause', undefined),
        errors.has('') ? h('span', { class: 'form-error' }, errors.get('')) : null,
      );
    }
    none.hidden = data.limits.length > 0;
    const key = JSON.stringify([data.limits, [...errors]]);
    if (body.dataset.key === key) return;
    body.dataset.key = key;
    const cap = (/** @type {number | null} */ n) => (n === null ? h('span', { class: 'muted' }, '–') : String(n));
    fill(
      body,
      ...data.limits.map((l) =>
        h(
          'tr',
          { 'data-limit': l.name, 'data-testid': 'limit-row', class: l.paused ? 'paused' : '' },
          h(
            'td',
            {},
            h('b', {}, l.name),
            l.paused ? [' ', h('span', { class: 'category', 'data-testid': 'limit-paused' }, 'paused')] : null,
          ),
          h(
            'td',
            { class: 'wrap' },
            Object.entries(l.match).map(([k, v], i) => [i > 0 ? ', ' : '', `${k} `, h('code', {}, v)]),
          ),
          h('td', {}, cap(l.maxConcurrent)),
          h('td', {}, cap(l.maxStartsPerMinute)),
          h('td', {}, cap(l.maxTokensPerMinute)),
          h('td', { 'data-testid': 'limit-in-use' }, String(l.inUse)),
          h('td', { 'data-testid': 'limit-waiting' }, String(l.waiting)),
          h(
            'td',
            { class: 'wrap' },
            l.keys.length === 0
              ? h('span', { class: 'muted' }, 'none in use')
              : l.keys.map((k, i) => [
                  i > 0 ? h('br') : null,
                  h('code', {}, k.key),
                  ` ${k.inUse} in use, ${k.waiting} waiting`,
                  k.cooldownUntil === null ? '' : `, cooling down until ${clock(k.cooldownUntil)}`,
                ]),
          ),
          h(
            'td',
            {},
            // Paused fleet-wide, every limit reads paused: its own button waits for dispatch to resume.
            data.paused ? null : l.paused ? button('Resume', 'resume', l.name) : button('Pause', 'pause', l.name),
            h('small', { class: 'field-error', 'data-error-for': 'limit' }, errors.get(l.name) ?? ''),
          ),
        ),
      ),
    );
  }

  return poll(refresh, 2000);
}
