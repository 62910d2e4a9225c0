// @ts-check
import { api, can, showIssues } from './api.js';
import { ago, badge, field, fill, h, ms, poll } from './dom.js';
import { link, navigate } from './nav.js';
import { fleetBar } from './fleet-bar.js';
import { policyEditor } from './policy-editor.js';
import { SESSION_STATES } from './vocabulary.js';

/**
 * Home: new session, sessions by state, the global retry policy.
 * @param {HTMLElement} main
 * @returns {() => void} stops the page's polling
 */
export function homePage(main) {
  // The filters, kept in the address (?state=&q=&agent=&within=) so a filtered list can be linked to.
  const params = new URLSearchParams(location.search);
  let filter = params.get('state') ?? '';
  const chips = h('div', { class: 'chips', 'data-testid': 'state-filter' });
  const search = h('input', {
    type: 'search',
    name: 'q',
    placeholder: 'session id contains…',
    'data-testid': 'session-search',
    value: params.get('q') ?? '',
  });
  const agentSelect = h('select', { name: 'agent', 'data-testid': 'agent-filter' });
  const within = h(
    'select',
    { name: 'within', 'data-testid': 'time-filter' },
    ...WITHIN.map(([value, label]) => h('option', { value, selected: (params.get('within') ?? '') === value }, label)),
  );
  const onFilter = () => {
    const next = new URLSearchParams();
    if (filter !== '') next.set('state', filter);
    if (search.value.trim() !== '') next.set('q', search.value.trim());
    if (agentSelect.value !== '') next.set('agent', agentSelect.value);
    if (within.value !== '') next.set('within', within.value);
    const query = next.toString();
    history.replaceState(null, '', query === '' ? location.pathname : `${location.pathname}?${query}`);
    void refresh();
  };
  search.addEventListener('input', onFilter);
  agentSelect.addEventListener('change', onFilter);
  within.addEventListener('change', onFilter);
  const filters = h(
    'div',
    { class: 'filters' },
    search,
    h('label', {}, 'agent ', agentSelect),
    h('label', {}, 'updated ', within),
  );
  const tbody = h('tbody', { 'data-testid': 'sessions-body' });
  const table = h(
    'table',
    { 'data-testid': 'sessions-table' },
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        ['session', 'agent', 'state', 'turn', 'attempts', 'next retry', 'updated', 'prompt'].map((t) => h('th', {}, t)),
      ),
    ),
    tbody,
  );

  const inputs = {
    prompt: h('textarea', { name: 'prompt', placeholder: 'What should the agent do?', 'data-testid': 'new-prompt' }),
    sessionId: h('input', { type: 'text', name: 'sessionId', placeholder: 'optional: generated when empty' }),
    provider: h('input', { type: 'text', name: 'provider', placeholder: 'agent default' }),
    model: h('input', { type: 'text', name: 'model', placeholder: 'agent default' }),
    cwd: h('input', { type: 'text', name: 'cwd', placeholder: "worker's directory" }),
  };
  const form = h(
    'form',
    { class: 'stack', 'data-testid': 'new-session-form', novalidate: true },
    field('prompt', 'prompt', inputs.prompt),
    h(
      'div',
      { class: 'row' },
      field('session id', 'sessionId', inputs.sessionId),
      field('provider', 'options.provider', inputs.provider),
      field('model', 'options.model', inputs.model),
      field('working directory', 'options.cwd', inputs.cwd),
    ),
    h('small', { class: 'field-error', 'data-error-for': 'options' }),
    h(
      'div',
      { class: 'actions' },
      h('button', { type: 'submit', class: 'primary', 'data-testid': 'create-session' }, 'Start session'),
      h('span', { class: 'form-error' }),
    ),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    /** @type {Record<string, string>} */
    const options = {};
    for (const key of /** @type {const} */ (['provider', 'model', 'cwd']))
      if (inputs[key].value.trim() !== '') options[key] = inputs[key].value.trim();
    /** @type {Record<string, unknown>} */
    const body = { prompt: inputs.prompt.value, ...(Object.keys(options).length > 0 ? { options } : {}) };
    if (inputs.sessionId.value.trim() !== '') body.sessionId = inputs.sessionId.value.trim();
    const result = await api('POST', '/api/sessions', body);
    if (!result.ok) return showIssues(form, result);
    navigate(`/sessions/${encodeURIComponent(result.data.sessionId)}`);
  });

  const policy = policyEditor({
    path: '/api/retry-policy',
    title: 'Global retry policy',
    allowReset: 'Reset to defaults',
  });
  const fleet = fleetBar();
  fill(
    main,
    fleet.bar,
    h(
      'div',
      { class: 'grid home' },
      h(
        'div',
        {},
        h(
          'section',
          { class: 'panel' },
          h('h2', {}, 'Sessions ', h('span', { class: 'muted', 'data-testid': 'sessions-count' })),
          filters,
          chips,
          h('div', { class: 'table-scroll' }, table),
        ),
      ),
      h(
        'div',
        {},
        can('write') ? h('section', { class: 'panel' }, h('h2', {}, 'New session'), form) : null,
        policy.panel,
      ),
    ),
  );

  // The list is fetched with the ETag of the last answer: when nothing changed the server answers 304
  // without reading a session, and the table is drawn again from the copy (its relative times move on).
  /** @type {{ etag: string, sessions: any[], more: boolean } | null} */
  let listCopy = null;
  async function refresh() {
    const headers = { Accept: 'application/json', ...(listCopy ? { 'If-None-Match': listCopy.etag } : {}) };
    const response = await fetch('/api/sessions?limit=200', { headers, cache: 'no-store' }).catch(() => null);
    if (response === null) return;
    if (response.status !== 304) {
      if (!response.ok) return;
      const data = await response.json().catch(() => null);
      if (data === null) return;
      listCopy = { etag: response.headers.get('ETag') ?? '', sessions: data.sessions, more: data.next != null };
    }
    if (listCopy === null) return;
    const sessions = listCopy.sessions;
    /** @type {Map<string, number>} */
    const counts = new Map();
    for (const s of sessions) counts.set(s.state, (counts.get(s.state) ?? 0) + 1);
    // Re-rendered only when the counts or the filter change, so a click never lands on a replaced button.
    const chipKey = JSON.stringify([filter, byState(counts)]);
    if (chips.dataset.key !== chipKey) {
      chips.dataset.key = chipKey;
      fill(
        chips,
        h(
          'button',
          {
            type: 'button',
            class: filter === '' ? 'active' : '',
            'data-state': '',
            onclick: () => ((filter = ''), onFilter()),
          },
          `all ${sessions.length}`,
        ),
        ...byState(counts).map(([state, n]) =>
          h(
            'button',
            {
              type: 'button',
              class: filter === state ? 'active' : '',
              'data-state': state,
              onclick: () => ((filter = state), onFilter()),
            },
            `${state} ${n}`,
          ),
        ),
      );
    }
    // The agents listed, the one chosen kept even when no session of it is on the page.
    const wanted = agentSelect.value || (params.get('agent') ?? '');
    const agents = [...new Set([...sessions.map((s) => String(s.agent)), ...(wanted ? [wanted] : [])])].sort();
    const agentKey = JSON.stringify(agents);
    if (agentSelect.dataset.key !== agentKey) {
      agentSelect.dataset.key = agentKey;
      fill(
        agentSelect,
        h('option', { value: '' }, 'any'),
        ...agents.map((a) => h('option', { value: a, selected: a === wanted }, a)),
      );
    }
    const q = search.value.trim().toLowerCase();
    const since = within.value === '' ? 0 : Date.now() - Number(within.value);
    const shown = sessions.filter(
      (s) =>
        (filter === '' || s.state === filter) &&
        (q === '' || String(s.sessionId).toLowerCase().includes(q)) &&
        (agentSelect.value === '' || s.agent === agentSelect.value) &&
        s.updatedAt >= since,
    );
    const count = main.querySelector('[data-testid="sessions-count"]');
    // The filters work on the page fetched (the newest 200): say so when there are older sessions.
    if (count)
      count.textContent = `(${shown.length}${listCopy.more ? ` of the newest ${sessions.length}: filters search these` : ''})`;
    fill(
      tbody,
      ...shown.map((s) =>
        h(
          'tr',
          { 'data-session-id': s.sessionId },
          h(
            'td',
            { class: 'id' },
            h(
              'a',
              {
                href: `/sessions/${encodeURIComponent(s.sessionId)}`,
                class: 'mono',
                title: s.sessionId,
                onclick: link,
              },
              s.sessionId,
            ),
          ),
          h('td', { 'data-testid': 'agent' }, s.agent),
          h(
            'td',
            {},
            badge(s.state),
            s.awaitingApproval
              ? [' ', h('span', { class: 'category', 'data-testid': 'awaiting-approval' }, 'awaiting approval')]
              : null,
          ),
          h('td', {}, s.turn ? `#${s.turn.index} ${s.turn.status}` : '–'),
          h(
            'td',
            {},
            s.turn ? String(s.turn.attempts) : '–',
            s.lastFailure
              ? [' ', h('span', { class: 'category', title: 'last failure' }, s.lastFailure.category)]
              : null,
          ),
          h(
            'td',
            {},
            s.waitingFor
              ? h(
                  'span',
                  {
                    'data-testid': 'waiting-for',
                    title: `waiting (${s.waitingFor.reason}) since ${new Date(s.waitingFor.since).toISOString()}`,
                  },
                  // The fleet's own key ('*') holds only paused dispatch.
                  s.waitingFor.limit === '*'
                    ? 'dispatch paused'
                    : `limit ${s.waitingFor.limit} (${s.waitingFor.reason})`,
                )
              : s.parkedUntil
                ? h(
                    'span',
                    {
                      'data-testid': 'parked-until',
                      title: `parked at a quota wall since ${new Date(s.parkedUntil.since).toISOString()}`,
                    },
                    `quota wall, resets in ${ms(Math.max(0, s.parkedUntil.until - Date.now()))}`,
                  )
                : s.nextRetryAt
                  ? `in ${ms(Math.max(0, s.nextRetryAt - Date.now()))}`
                  : '–',
          ),
          h('td', { title: new Date(s.updatedAt).toISOString() }, ago(s.updatedAt)),
          h('td', { class: 'prompt', title: s.turn?.prompt ?? '' }, s.turn?.prompt ?? ''),
        ),
      ),
    );
    if (shown.length === 0)
      tbody.append(
        h(
          'tr',
          {},
          h(
            'td',
            { colspan: 8, class: 'muted', 'data-testid': 'no-sessions' },
            sessions.length === 0 ? 'No sessions yet. Start one with the form.' : 'No session matches the filters.',
          ),
        ),
      );
  }
  const stopList = poll(refresh, 1000);
  const stopFleet = poll(fleet.refresh, 2000);
  return () => {
    stopList();
    stopFleet();
  };
}

/** The "updated" filter's choices: [milliseconds, label]. */
const WITHIN = [
  ['', 'any time'],
  [String(5 * 60_000), 'in the last 5 min'],
  [String(60 * 60_000), 'in the last hour'],
  [String(24 * 60 * 60_000), 'in the last 24 h'],
];

/**
 * The counts by state in the machine's order of states (SESSION_STATES), any other state after.
 * @param {Map<string, number>} counts
 * @returns {Array<[string, number]>}
 */
export function byState(counts) {
  const rank = (/** @type {string} */ state) => {
    const i = SESSION_STATES.indexOf(state);
    return i === -1 ? SESSION_STATES.length : i;
  };
  return [...counts.entries()].sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b));
}
