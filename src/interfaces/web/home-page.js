// @ts-check
import { api, can, showIssues } from './api.js';
import { ago, badge, field, fill, h, ms, poll } from './dom.js';
import { link, navigate } from './nav.js';
import { fleetBar } from './fleet-bar.js';
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
    limit = PAGE;
    void refresh();
  };
  /** How many rows to ask for: "Show more" adds a page (the API gives at most 1000 at once). */
  let limit = PAGE;
  const moreButton = h(
    'button',
    {
      type: 'button',
      class: 'secondary',
      'data-testid': 'show-more',
      hidden: true,
      onclick: () => ((limit = Math.min(1000, limit + PAGE)), void refresh()),
    },
    'Show more',
  );
  const filterError = h('span', { class: 'form-error', 'data-testid': 'filter-error' });
  search.addEventListener('input', onFilter);
  agentSelect.addEventListener('change', onFilter);
  within.addEventListener('change', onFilter);
  const filters = h(
    'div',
    { class: 'filters' },
    search,
    h('label', {}, 'agent ', agentSelect),
    h('label', {}, 'updated ', within),
    filterError,
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
          h('div', { class: 'actions' }, moreButton),
        ),
      ),
      h(
        'div',
        {},
        can('write') ? h('section', { class: 'panel' }, h('h2', {}, 'New session'), form) : null,
        h(
          'section',
          { class: 'panel' },
          h('h2', {}, 'Policy and limits'),
          h(
            'p',
            { class: 'muted' },
            h('a', { href: '/policy', onclick: link }, 'Policies'),
            ': what callers may choose (the deployment policy) and how failed attempts are retried (the global retry policy). ',
            h('a', { href: '/limits', onclick: link }, 'Fleet limits'),
            ': how many attempts run at once, per limit, and paused dispatch.',
          ),
        ),
      ),
    ),
  );

  // The filters are the API's (GET /api/sessions?q=&state=&agent=&updatedSince=), so they reach past the newest
  // page. Each list is fetched with the ETag of its last answer: when nothing changed the server answers 304
  // without reading a session, and the table is drawn again from the copy (its relative times move on).
  /** @type {Map<string, { etag: string, sessions: any[], next: string | null }>} */
  const copies = new Map();
  /** @param {URLSearchParams} query @returns {Promise<{ sessions: any[], next: string | null } | null>} */
  async function list(query) {
    const url = `/api/sessions?${query}`;
    const copy = copies.get(url);
    const headers = { Accept: 'application/json', ...(copy ? { 'If-None-Match': copy.etag } : {}) };
    const response = await fetch(url, { headers, cache: 'no-store' }).catch(() => null);
    if (response === null) return null;
    if (response.status === 304) return copy ?? null;
    const data = await response.json().catch(() => null);
    if (!response.ok || data === null) {
      // A filter the API refuses (e.g. an id piece over 100 characters): said under the filters, with its field.
      /** @type {Array<{ field: string, message: string }>} */
      const issues = data?.issues ?? [];
      filterError.textContent =
        issues.length > 0
          ? issues.map((i) => `${i.field}: ${i.message}`).join('; ')
          : (data?.error ?? `cannot list the sessions (HTTP ${response.status})`);
      return null;
    }
    const fresh = { etag: response.headers.get('ETag') ?? '', sessions: data.sessions, next: data.next };
    // Only the copies of the current filters are worth keeping.
    if (copies.size > 4) copies.clear();
    copies.set(url, fresh);
    return fresh;
  }
  /** The deployment policy's agents (what a caller may choose), for the agent filter. @type {string[]} */
  let policyAgents = [];
  void api('GET', '/api/deployment-policy').then((r) => {
    if (r.ok && Array.isArray(r.data.agents)) policyAgents = r.data.agents;
  });
  async function refresh() {
    const query = new URLSearchParams({ limit: String(limit) });
    const q = search.value.trim();
    if (q !== '') query.set('q', q);
    if (agentSelect.value !== '') query.set('agent', agentSelect.value);
    // Rounded down to 10 s, so the address (and its ETag) stays the same from one poll to the next.
    if (within.value !== '')
      query.set('updatedSince', String(Math.floor((Date.now() - Number(within.value)) / 10_000) * 10_000));
    // The chips count the states among the sessions the other filters match; the rows are of the chosen state too.
    const all = await list(query);
    if (all === null) return;
    // The states of the newest sessions, whatever the other filters: a chip for each, so a state can be chosen
    // (and show 0) while a search is on.
    const filtered = query.toString() !== `limit=${limit}`;
    const newest = filtered ? await list(new URLSearchParams({ limit: String(PAGE) })) : all;
    if (newest === null) return;
    let rows = all;
    if (filter !== '') {
      query.set('state', filter);
      const ofState = await list(query);
      if (ofState === null) return;
      rows = ofState;
    }
    filterError.textContent = '';
    const sessions = all.sessions;
    /** @type {Map<string, number>} */
    const counts = new Map();
    for (const s of newest.sessions) counts.set(s.state, 0);
    for (const s of sessions) counts.set(s.state, (counts.get(s.state) ?? 0) + 1);
    // Re-rendered only when the counts or the filter change, so a click never lands on a replaced button.
    const chipKey = JSON.stringify([filter, byState(counts), all.next !== null]);
    if (chips.dataset.key !== chipKey) {
      chips.dataset.key = chipKey;
      const plus = all.next !== null ? '+' : '';
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
          `all ${sessions.length}${plus}`,
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
            `${state} ${n}${plus}`,
          ),
        ),
        // A state with no session among those counted can still be chosen from the address: keep its chip.
        filter !== '' && !counts.has(filter)
          ? h('button', { type: 'button', class: 'active', 'data-state': filter }, `${filter}`)
          : null,
      );
    }
    // The agents a caller may choose and those of the sessions listed; the one chosen kept even when none is listed.
    const wanted = agentSelect.value || (params.get('agent') ?? '');
    const agents = [
      ...new Set([...policyAgents, ...sessions.map((s) => String(s.agent)), ...(wanted ? [wanted] : [])]),
    ].sort();
    const agentKey = JSON.stringify(agents);
    if (agentSelect.dataset.key !== agentKey) {
      agentSelect.dataset.key = agentKey;
      fill(
        agentSelect,
        h('option', { value: '' }, 'any'),
        ...agents.map((a) => h('option', { value: a, selected: a === wanted }, a)),
      );
    }
    const shown = rows.sessions;
    const count = main.querySelector('[data-testid="sessions-count"]');
    // A `next`: more sessions may match further back than the API searched this time.
    if (count) count.textContent = `(${shown.length}${rows.next !== null ? ' shown, more further back' : ''})`;
    moreButton.hidden = rows.next === null || limit >= 1000;
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
          promptCell(s),
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
            query.toString() === `limit=${limit}`
              ? 'No sessions yet. Start one with the form.'
              : 'No session matches the filters.',
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

/**
 * The latest turn's prompt: two lines of it, all of it on hover, and a click opens it whole in place (read from
 * the session when the list's 200 characters are not all of it).
 * @param {{ sessionId: string, turn: { prompt: string | null, promptLength?: number } | null }} s
 */
function promptCell(s) {
  const prompt = s.turn?.prompt ?? '';
  const cut = (s.turn?.promptLength ?? prompt.length) > prompt.length;
  const text = h('span', { class: 'text' }, cut ? `${prompt}…` : prompt);
  const cell = h(
    'td',
    {
      class: 'prompt',
      'data-testid': 'prompt',
      title: cut ? `${prompt}… (${s.turn?.promptLength} characters: click to read it all)` : prompt,
    },
    text,
  );
  if (prompt === '') return cell;
  cell.addEventListener('click', async () => {
    if (cell.classList.toggle('expanded') && cut && cell.dataset.whole !== 'true') {
      const result = await api('GET', `/api/sessions/${encodeURIComponent(s.sessionId)}`);
      if (result.ok && typeof result.data.turn?.prompt === 'string') {
        text.textContent = result.data.turn.prompt;
        cell.dataset.whole = 'true';
      }
    }
  });
  return cell;
}

/** Rows asked for at first, and added by "Show more". */
const PAGE = 200;

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
