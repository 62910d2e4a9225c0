// @ts-check
// Webhook delivery (GET /api/webhooks/dead, /api/webhooks/pending): the dead letters (events not delivered within
// webhookDelivery.maxAgeMs), and the sessions whose events wait for delivery. The webhooks are the operator's
// (SESSIOND_WEBHOOKS); admin replays dead letters from one on (POST /api/webhooks/replay).

import { api, can } from './api.js';
import { fill, h, poll } from './dom.js';

/**
 * @typedef {{ seq: number, deadAt: string, sessionId: string, id: string, type: string, attempts: number, lastError: string }} DeadLetter
 * @typedef {{ sessionId: string, waiting: number, nextAt: number | null }} Pending
 */

/**
 * @param {HTMLElement} main
 * @returns {() => void}
 */
export function webhooksPage(main) {
  const pending = h('p', { 'data-testid': 'webhooks-pending' });
  const body = h('tbody', { 'data-testid': 'dead-letters-body' });
  const none = h('p', { class: 'muted', 'data-testid': 'no-dead-letters', hidden: true }, 'No dead letters.');
  const note = h('span', { class: 'form-ok', 'data-testid': 'webhooks-note' });
  const failure = h('span', { class: 'form-error', 'data-testid': 'webhooks-error' });

  fill(
    main,
    h(
      'section',
      { class: 'panel', 'data-testid': 'webhooks-page' },
      h('h2', {}, 'Webhooks'),
      h(
        'p',
        { class: 'muted' },
        'Events are retried with backoff for ',
        h('code', {}, 'webhookDelivery.maxAgeMs'),
        ' (3 days by default), then kept here as dead letters. Replaying sends them again with the same ',
        h('code', {}, 'webhook-id'),
        '.',
      ),
      pending,
      none,
      h(
        'div',
        { class: 'table-scroll' },
        h(
          'table',
          { 'data-testid': 'dead-letters-table' },
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              ['#', 'dead since', 'session', 'event', 'webhook-id', 'attempts', 'last error', ''].map((t) =>
                h('th', {}, t),
              ),
            ),
          ),
          body,
        ),
      ),
      h('div', { class: 'actions' }, note, failure),
    ),
  );

  /** @param {number} seq */
  async function replay(seq) {
    const result = await api('POST', '/api/webhooks/replay', { since: String(seq) });
    note.textContent = result.ok ? `${result.data.replayed} dead letter(s) queued for delivery again` : '';
    failure.textContent = result.ok ? '' : (result.data?.error ?? `replay failed (HTTP ${result.status})`);
    body.dataset.key = '';
    await refresh();
  }

  async function refresh() {
    const [dead, waiting] = await Promise.all([api('GET', '/api/webhooks/dead'), api('GET', '/api/webhooks/pending')]);
    if (!dead.ok || !waiting.ok) {
      const bad = dead.ok ? waiting : dead;
      failure.textContent = bad.data?.error ?? `cannot read webhook delivery (HTTP ${bad.status})`;
      return;
    }
    /** @type {Pending[]} */
    const queued = waiting.data;
    const events = queued.reduce((n, p) => n + p.waiting, 0);
    pending.textContent =
      queued.length === 0
        ? 'No events waiting for delivery.'
        : `${events} event(s) of ${queued.length} session(s) waiting for delivery.`;
    /** @type {DeadLetter[]} */
    const letters = dead.data;
    none.hidden = letters.length > 0;
    const key = JSON.stringify(letters.map((d) => d.seq));
    if (body.dataset.key === key) return;
    body.dataset.key = key;
    fill(
      body,
      ...letters.map((d) =>
        h(
          'tr',
          { 'data-testid': 'dead-letter', 'data-seq': String(d.seq) },
          h('td', {}, String(d.seq)),
          h('td', {}, new Date(d.deadAt).toLocaleString()),
          h('td', {}, h('code', {}, d.sessionId)),
          h('td', {}, d.type),
          h('td', {}, h('code', {}, d.id)),
          h('td', {}, String(d.attempts)),
          h('td', { class: 'wrap' }, d.lastError),
          h(
            'td',
            {},
            can('admin')
              ? h(
                  'button',
                  {
                    type: 'button',
                    class: 'secondary',
                    'data-testid': 'replay-from',
                    title: 'send this dead letter and every later one again',
                    onclick: () => void replay(d.seq),
                  },
                  'Replay from here',
                )
              : null,
          ),
        ),
      ),
    );
  }

  return poll(refresh, 2000);
}
