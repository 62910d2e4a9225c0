// @ts-check
// The schedules (GET /api/schedules): each one's timing, target, status, next run, last run and its outcome, and its
// firings by outcome. Added and changed from the CLI, the API or the library (docs/schedules.md); a caller with
// the write scope pauses and resumes one here.

import { api, can } from './api.js';
import { clock, fill, h, poll } from './dom.js';

/**
 * @typedef {{ at: number, tick: number, outcome: string, sessionId?: string, turn?: number, error?: string }} Run
 * @typedef {{ id: string, cron?: string, tz?: string, everyMs?: number, sessionId: string | null, prompt: string,
 *   whenBusy: string, owner: string, status: 'active' | 'paused' | 'ended', endedReason?: string,
 *   nextRunAt: number | null, lastRun: Run | null, firings: Record<string, number> }} Schedule
 */

/**
 * @param {HTMLElement} main
 * @returns {() => void}
 */
export function schedulesPage(main) {
  const body = h('tbody', { 'data-testid': 'schedules-body' });
  const none = h(
    'p',
    { class: 'muted', 'data-testid': 'no-schedules', hidden: true },
    'No schedule. Add one with ',
    h('code', {}, 'sessiond schedule add'),
    ' or ',
    h('code', {}, 'POST /api/schedules'),
    '.',
  );
  const note = h('span', { class: 'form-error', 'data-testid': 'schedules-error' });

  fill(
    main,
    h(
      'section',
      { class: 'panel', 'data-testid': 'schedules-page' },
      h('h2', {}, 'Schedules'),
      h(
        'p',
        { class: 'muted' },
        'Prompts enqueued on a cron expression or an interval, into one session or a new session per firing; the workers fire each one once per tick.',
      ),
      none,
      h(
        'div',
        { class: 'table-scroll' },
        h(
          'table',
          { 'data-testid': 'schedules-table' },
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              ['schedule', 'when', 'into', 'status', 'next run', 'last run', 'firings', ''].map((t) => h('th', {}, t)),
            ),
          ),
          body,
        ),
      ),
      h('div', { class: 'actions' }, note),
    ),
  );

  /** @param {'pause' | 'resume'} action @param {string} id */
  async function act(action, id) {
    const result = await api('POST', `/api/schedules/${encodeURIComponent(id)}/${action}`);
    note.textContent = result.ok ? '' : (result.data?.error ?? `${action} failed (HTTP ${result.status})`);
    body.dataset.key = '';
    await refresh();
  }

  /** @param {Schedule} s */
  const actions = (s) =>
    !can('write') || s.status === 'ended'
      ? null
      : h(
          'button',
          {
            type: 'button',
            class: 'secondary',
            'data-testid': `${s.status === 'paused' ? 'resume' : 'pause'}-schedule`,
            onclick: () => void act(s.status === 'paused' ? 'resume' : 'pause', s.id),
          },
          s.status === 'paused' ? 'Resume' : 'Pause',
        );

  async function refresh() {
    const result = await api('GET', '/api/schedules');
    if (!result.ok)
      return void (note.textContent = result.data?.error ?? `cannot read the schedules (HTTP ${result.status})`);
    /** @type {Schedule[]} */
    const schedules = result.data.schedules;
    none.hidden = schedules.length > 0;
    const key = JSON.stringify(schedules);
    if (body.dataset.key === key) return;
    body.dataset.key = key;
    fill(
      body,
      ...schedules.map((s) =>
        h(
          'tr',
          { 'data-schedule': s.id, 'data-testid': 'schedule-row', class: s.status === 'active' ? '' : 'paused' },
          h('td', {}, h('b', {}, s.id), h('br'), h('small', { class: 'muted' }, s.prompt.slice(0, 80))),
          h(
            'td',
            {},
            s.cron !== undefined
              ? [h('code', {}, s.cron), s.tz === undefined ? '' : ` ${s.tz}`]
              : `every ${formatMs(s.everyMs ?? 0)}`,
          ),
          h(
            'td',
            {},
            s.sessionId === null
              ? 'a new session each time'
              : h('a', { href: `/sessions/${encodeURIComponent(s.sessionId)}` }, s.sessionId),
          ),
          h(
            'td',
            { 'data-testid': 'schedule-status' },
            s.status === 'ended' ? `ended (${s.endedReason ?? 'unknown'})` : s.status,
          ),
          h('td', { 'data-testid': 'schedule-next' }, s.nextRunAt === null ? '–' : clock(s.nextRunAt)),
          h(
            'td',
            { 'data-testid': 'schedule-last' },
            s.lastRun === null
              ? h('span', { class: 'muted' }, 'never')
              : [
                  clock(s.lastRun.at),
                  ' ',
                  h('span', { class: 'category', 'data-testid': 'schedule-outcome' }, s.lastRun.outcome),
                  s.lastRun.sessionId === undefined
                    ? ''
                    : [
                        ' ',
                        h('a', { href: `/sessions/${encodeURIComponent(s.lastRun.sessionId)}` }, s.lastRun.sessionId),
                        s.lastRun.turn === undefined ? '' : ` turn ${s.lastRun.turn}`,
                      ],
                ],
          ),
          h(
            'td',
            {},
            Object.entries(s.firings)
              .map(([outcome, n]) => `${outcome} ${n}`)
              .join(', ') || '–',
          ),
          h('td', {}, actions(s)),
        ),
      ),
    );
  }

  return poll(refresh, 2000);
}

/** @param {number} ms */
function formatMs(ms) {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  return `${ms / 1000} s`;
}
