// @ts-check
// The home page's fleet bar: live workers and what they offer, paused dispatch (with Resume for
// admin), the fleet limits in use. Read from GET /api/workers and GET /api/limits.

import { api, can } from './api.js';
import { ago, fill, h } from './dom.js';

/**
 * @typedef {{ id: string, host: string, pid: number, lastSeen: number, live: boolean, active: number,
 *   concurrency?: number, agents?: string[] }} Worker
 * @typedef {{ name: string, paused: boolean, inUse: number, waiting: number, maxConcurrent: number | null }} Limit
 */

/** @returns {{ bar: HTMLElement, refresh: () => Promise<void> }} */
export function fleetBar() {
  const bar = h('section', { class: 'panel fleet', 'data-testid': 'fleet-bar' });
  const note = h('span', { class: 'muted', 'data-testid': 'fleet-note' });

  /** @param {string | undefined} limit */
  async function resume(limit) {
    const result = await api('POST', '/api/dispatch/resume', limit === undefined ? {} : { limit });
    note.textContent = result.ok
      ? `resumed: ${result.data.woken} waiting session${result.data.woken === 1 ? '' : 's'} woken`
      : (result.data?.error ?? `resume failed (HTTP ${result.status})`);
    await refresh();
  }

  /** @param {string} label @param {string | undefined} limit @param {string} testid */
  const resumeButton = (label, limit, testid) =>
    can('admin')
      ? h(
          'button',
          { type: 'button', class: 'secondary', 'data-testid': testid, onclick: () => void resume(limit) },
          label,
        )
      : null;

  async function refresh() {
    const [workers, limits] = await Promise.all([api('GET', '/api/workers'), api('GET', '/api/limits')]);
    if (!workers.ok) return void fill(bar, h('span', { class: 'form-error' }, 'cannot read the workers'));
    /** @type {Worker[]} */
    const all = workers.data.workers;
    const live = all.filter((w) => w.live);
    /** @type {Limit[]} */
    const rules = limits.ok ? limits.data.limits : [];
    const fleetPaused = limits.ok && limits.data.paused === true;
    const key = JSON.stringify([
      live.map((w) => [w.id, w.active, w.concurrency, w.agents]),
      all.length,
      fleetPaused,
      rules.map((r) => [r.name, r.paused, r.inUse, r.waiting]),
    ]);
    // Drawn again only when something changed, so a click never lands on a replaced button.
    if (bar.dataset.key === key) return;
    bar.dataset.key = key;
    fill(
      bar,
      h(
        'div',
        { class: 'fleet-row' },
        h(
          'span',
          { class: `fleet-count${live.length === 0 ? ' none' : ''}`, 'data-testid': 'workers-live' },
          `${live.length} worker${live.length === 1 ? '' : 's'} live`,
        ),
        live.length === 0
          ? h(
              'span',
              { class: 'form-error', 'data-testid': 'no-worker' },
              all.length === 0
                ? 'no worker has ever sent a heartbeat: sessions wait queued until one runs (sessiond worker)'
                : `no heartbeat since ${ago(Math.max(...all.map((w) => w.lastSeen)))}: sessions wait queued until a worker runs`,
            )
          : null,
        ...live.map((w) =>
          h(
            'span',
            {
              class: 'worker',
              'data-testid': 'worker',
              'data-worker-id': w.id,
              title: `${w.id}, seen ${ago(w.lastSeen)}`,
            },
            h('b', { class: 'mono' }, `${w.host}:${w.pid}`),
            ` ${w.active}${w.concurrency === undefined ? '' : `/${w.concurrency}`} busy`,
            w.agents
              ? h('span', { class: 'muted', 'data-testid': 'worker-agents' }, ` · ${w.agents.join(', ')}`)
              : null,
          ),
        ),
      ),
      fleetPaused || rules.length > 0
        ? h(
            'div',
            { class: 'fleet-row' },
            fleetPaused
              ? h(
                  'span',
                  { class: 'paused', 'data-testid': 'dispatch-paused' },
                  h('b', {}, 'dispatch paused'),
                  ': no attempt starts anywhere ',
                  resumeButton('Resume', undefined, 'resume-dispatch'),
                )
              : null,
            ...rules.map((r) =>
              h(
                'span',
                { class: `limit${r.paused ? ' paused' : ''}`, 'data-testid': 'fleet-limit', 'data-limit': r.name },
                h('b', {}, r.name),
                ` ${r.inUse}${r.maxConcurrent === null ? '' : `/${r.maxConcurrent}`} in use`,
                r.waiting > 0 ? `, ${r.waiting} waiting` : '',
                r.paused ? [' · paused ', resumeButton('Resume', r.name, 'resume-limit')] : null,
              ),
            ),
          )
        : null,
      note,
    );
  }

  return { bar, refresh };
}
