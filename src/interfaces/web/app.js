/* global document, window, location, history, EventSource, CSS */
// The sessiond dashboard: plain DOM, no framework, no build step. Everything it
// shows comes from the HTTP API (/api/…); it holds no business logic.

const meta = (name) => document.querySelector(`meta[name="${name}"]`)?.getAttribute('content') ?? '';
const MESSAGE_TYPES = meta('sessiond-message-types').split(/\s+/).filter(Boolean);
const CATEGORIES = meta('sessiond-failure-categories').split(/\s+/).filter(Boolean);
const SETTLED = new Set(['completed', 'failed', 'cancelled']);
const SVG_NS = 'http://www.w3.org/2000/svg';

// ---------------------------------------------------------------------------------------------
// DOM helpers
// ---------------------------------------------------------------------------------------------

/** h('div', { class: 'x', 'data-testid': 'y', onclick: fn }, child, 'text') */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
    else if (key === 'text') el.textContent = String(value);
    else el.setAttribute(key, value === true ? '' : String(value));
  }
}

function append(el, children) {
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(typeof child === 'string' || typeof child === 'number' ? document.createTextNode(String(child)) : child);
  }
}

/** Replaces the children of `el`, skipping null/false and flattening arrays (unlike replaceChildren). */
function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

function badge(state) {
  return h('span', { class: `badge state-${state}`, 'data-testid': 'state-badge', 'data-state': state }, state);
}

function ms(value) {
  if (value === null || value === undefined) return '–';
  if (value < 1000) return `${Math.round(value)} ms`;
  if (value < 60_000) return `${(value / 1000).toFixed(value < 10_000 ? 1 : 0)} s`;
  return `${Math.floor(value / 60_000)} min ${Math.round((value % 60_000) / 1000)} s`;
}

function ago(at) {
  if (!at) return '–';
  const d = Date.now() - at;
  return d < 2000 ? 'just now' : `${ms(d)} ago`;
}

function clock(at) {
  return at ? new Date(at).toLocaleTimeString() : '–';
}

function preview(value, max = 300) {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  if (text === undefined) return '';
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

// ---------------------------------------------------------------------------------------------
// API
// ---------------------------------------------------------------------------------------------

// Auth: the page never holds a token. It logs in once (POST /api/login → an HttpOnly cookie the
// browser sends by itself), learns its scope from /api/whoami, and shows only what that scope allows.
const RANK = { read: 1, write: 2, admin: 3 };
/** `{name, scope, via}` once known; null when logged out. */
let me = null;
const can = (scope) => me !== null && RANK[me.scope] >= RANK[scope];

async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (error) {
    return { ok: false, status: 0, data: { error: `cannot reach the server: ${error.message}` } };
  }
  const data = await response.json().catch(() => null);
  // Logged out (or the login expired) while on a page: back to the login form.
  if (response.status === 401 && me !== null && path !== '/api/login') {
    me = null;
    route();
  }
  return { ok: response.ok, status: response.status, data };
}

/** Shows the API's 400 `issues` at their fields (`[data-error-for=field]`); the rest at the form. */
function showIssues(form, result) {
  clearIssues(form);
  const formError = form.querySelector('.form-error');
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
    const summary = issues.length === 0 ? (result.data?.error ?? `request failed (HTTP ${result.status})`) : leftover.join('; ');
    formError.textContent = summary;
  }
}

function findErrorSlot(form, field) {
  const parts = String(field).split('.');
  for (let n = parts.length; n > 0; n--) {
    const slot = form.querySelector(`[data-error-for="${CSS.escape(parts.slice(0, n).join('.'))}"]`);
    if (slot) return slot;
  }
  return null;
}

function clearIssues(form) {
  for (const slot of form.querySelectorAll('[data-error-for]')) slot.textContent = '';
  for (const field of form.querySelectorAll('.field.invalid')) field.classList.remove('invalid');
  const formError = form.querySelector('.form-error');
  if (formError) formError.textContent = '';
  const ok = form.querySelector('.form-ok');
  if (ok) ok.textContent = '';
}

function field(label, name, input, hint) {
  return h('label', { class: 'field' }, h('span', {}, label), input, hint ? h('small', { class: 'muted' }, hint) : null, h('small', { class: 'field-error', 'data-error-for': name }));
}

// ---------------------------------------------------------------------------------------------
// Retry-policy editor (global or one session's)
// ---------------------------------------------------------------------------------------------

const POLICY_NUMBERS = [
  ['maxAttempts', 'max attempts', 'attempts in total, 1–100'],
  ['initialDelayMs', 'initial delay (ms)', '0–3,600,000'],
  ['multiplier', 'multiplier', '1–10'],
  ['maxDelayMs', 'max delay (ms)', '≥ initial delay'],
  ['maxRetryAfterMs', 'max Retry-After (ms)', '0–86,400,000'],
];

/** A value typed in a text box: a number when it reads as one, else the text (the API says what is wrong). */
function typed(text) {
  const t = text.trim();
  return t !== '' && /^-?\d+(\.\d+)?$/.test(t) ? Number(t) : t;
}

function policyEditor({ path, title, allowReset }) {
  let loaded = null;
  const inputs = {};
  const sourceEl = h('span', { class: 'muted', 'data-testid': 'policy-source' });
  const form = h('form', { class: 'stack', 'data-testid': 'policy-form', novalidate: true });
  for (const [name] of POLICY_NUMBERS) inputs[name] = h('input', { type: 'text', name, inputmode: 'decimal', autocomplete: 'off' });
  inputs.jitter = h('input', { type: 'text', name: 'jitter', autocomplete: 'off' });
  inputs.enabled = h('input', { type: 'checkbox', name: 'enabled' });
  inputs.honorRetryAfter = h('input', { type: 'checkbox', name: 'honorRetryAfter' });
  const categoryBoxes = CATEGORIES.map((c) => h('input', { type: 'checkbox', name: 'retryOn', value: c }));

  form.append(
    h('div', { class: 'row' }, POLICY_NUMBERS.slice(0, 3).map(([name, label, hint]) => field(label, name, inputs[name], hint))),
    h('div', { class: 'row' }, POLICY_NUMBERS.slice(3).map(([name, label, hint]) => field(label, name, inputs[name], hint)), field('jitter', 'jitter', inputs.jitter, "'none', 'full', 'equal' or 0–1")),
    h('div', { class: 'row' }, h('label', { class: 'field checkbox' }, inputs.enabled, 'retries enabled', h('small', { class: 'field-error', 'data-error-for': 'enabled' })), h('label', { class: 'field checkbox' }, inputs.honorRetryAfter, 'honor Retry-After', h('small', { class: 'field-error', 'data-error-for': 'honorRetryAfter' }))),
    h('div', { class: 'field' }, h('span', {}, 'retry on'), h('div', { class: 'categories' }, categoryBoxes.map((box) => h('label', {}, box, box.value))), h('small', { class: 'field-error', 'data-error-for': 'retryOn' })),
    h('small', { class: 'field-error', 'data-error-for': 'policy' }),
    h(
      'div',
      { class: 'actions' },
      h('button', { type: 'submit', class: 'primary', 'data-testid': 'policy-save' }, 'Save policy'),
      allowReset ? h('button', { type: 'button', class: 'secondary', 'data-testid': 'policy-reset', onclick: reset }, allowReset) : null,
      h('span', { class: 'form-error' }),
      h('span', { class: 'form-ok', 'data-testid': 'policy-ok' }),
    ),
  );
  if (!can('admin')) {
    // Below admin the policy is shown, not edited.
    for (const el of form.querySelectorAll('input, button')) el.disabled = true;
    form.querySelector('[data-testid="policy-save"]')?.remove();
    form.querySelector('[data-testid="policy-reset"]')?.remove();
  }
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void save();
  });

  function fill(policy, source) {
    loaded = policy;
    for (const [name] of POLICY_NUMBERS) inputs[name].value = String(policy[name]);
    inputs.jitter.value = String(policy.jitter);
    inputs.enabled.checked = policy.enabled;
    inputs.honorRetryAfter.checked = policy.honorRetryAfter;
    for (const box of categoryBoxes) box.checked = policy.retryOn.includes(box.value);
    sourceEl.textContent = `(${source})`;
  }

  function patch() {
    const out = {};
    for (const [name] of POLICY_NUMBERS) out[name] = typed(inputs[name].value);
    out.jitter = typed(inputs.jitter.value);
    out.enabled = inputs.enabled.checked;
    out.honorRetryAfter = inputs.honorRetryAfter.checked;
    out.retryOn = categoryBoxes.filter((b) => b.checked).map((b) => b.value);
    // Only what changed: a per-session policy keeps following nothing it was not told.
    if (loaded) for (const key of Object.keys(out)) if (JSON.stringify(out[key]) === JSON.stringify(loaded[key])) delete out[key];
    return out;
  }

  async function load() {
    const result = await api('GET', path);
    if (result.ok) fill(result.data.policy, result.data.source);
    else showIssues(form, result);
  }

  async function save() {
    const result = await api('PUT', path, patch());
    if (!result.ok) return showIssues(form, result);
    clearIssues(form);
    fill(result.data.policy, result.data.source);
    form.querySelector('.form-ok').textContent = 'saved';
  }

  async function reset() {
    const result = await api('DELETE', path);
    if (!result.ok) return showIssues(form, result);
    clearIssues(form);
    await load();
    form.querySelector('.form-ok').textContent = 'reset';
  }

  const panel = h('section', { class: 'panel', 'data-testid': 'policy-panel' }, h('h2', {}, title, ' ', sourceEl), form);
  void load();
  return { panel, load };
}

// ---------------------------------------------------------------------------------------------
// Home: new session, sessions by state, global policy
// ---------------------------------------------------------------------------------------------

function homePage(main) {
  let filter = '';
  const chips = h('div', { class: 'chips', 'data-testid': 'state-filter' });
  const tbody = h('tbody', { 'data-testid': 'sessions-body' });
  const table = h(
    'table',
    { 'data-testid': 'sessions-table' },
    h('thead', {}, h('tr', {}, ['session', 'agent', 'state', 'turn', 'attempts', 'next retry', 'updated', 'prompt'].map((t) => h('th', {}, t)))),
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
    h('div', { class: 'row' }, field('session id', 'sessionId', inputs.sessionId), field('provider', 'options.provider', inputs.provider), field('model', 'options.model', inputs.model), field('working directory', 'options.cwd', inputs.cwd)),
    h('small', { class: 'field-error', 'data-error-for': 'options' }),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', 'data-testid': 'create-session' }, 'Start session'), h('span', { class: 'form-error' })),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const options = {};
    for (const key of ['provider', 'model', 'cwd']) if (inputs[key].value.trim() !== '') options[key] = inputs[key].value.trim();
    const body = { prompt: inputs.prompt.value, ...(Object.keys(options).length > 0 ? { options } : {}) };
    if (inputs.sessionId.value.trim() !== '') body.sessionId = inputs.sessionId.value.trim();
    const result = await api('POST', '/api/sessions', body);
    if (!result.ok) return showIssues(form, result);
    navigate(`/sessions/${encodeURIComponent(result.data.sessionId)}`);
  });

  const policy = policyEditor({ path: '/api/retry-policy', title: 'Global retry policy', allowReset: 'Reset to defaults' });
  fill(main, 
    h('div', { class: 'grid home' },
      h('div', {},
        h('section', { class: 'panel' }, h('h2', {}, 'Sessions ', h('span', { class: 'muted', 'data-testid': 'sessions-count' })), chips, h('div', { class: 'table-scroll' }, table)),
      ),
      h('div', {},
        can('write') ? h('section', { class: 'panel' }, h('h2', {}, 'New session'), form) : null,
        policy.panel,
      ),
    ),
  );

  // The list is fetched with the ETag of the last answer: when nothing changed the server answers 304
  // without reading a session, and the table is drawn again from the copy (its relative times move on).
  let listCopy = null;
  async function refresh() {
    const headers = { Accept: 'application/json', ...(listCopy ? { 'If-None-Match': listCopy.etag } : {}) };
    const response = await fetch('/api/sessions?limit=200', { headers, cache: 'no-store' }).catch(() => null);
    if (response === null) return;
    if (response.status !== 304) {
      if (!response.ok) return;
      const data = await response.json().catch(() => null);
      if (data === null) return;
      listCopy = { etag: response.headers.get('ETag') ?? '', sessions: data.sessions };
    }
    if (listCopy === null) return;
    const sessions = listCopy.sessions;
    const counts = new Map();
    for (const s of sessions) counts.set(s.state, (counts.get(s.state) ?? 0) + 1);
    // Re-rendered only when the counts or the filter change, so a click never lands on a replaced button.
    const chipKey = JSON.stringify([filter, [...counts.entries()].sort()]);
    if (chips.dataset.key !== chipKey) {
      chips.dataset.key = chipKey;
      fill(chips, 
        h('button', { type: 'button', class: filter === '' ? 'active' : '', 'data-state': '', onclick: () => ((filter = ''), void refresh()) }, `all ${sessions.length}`),
        ...[...counts.entries()].sort().map(([state, n]) =>
          h('button', { type: 'button', class: filter === state ? 'active' : '', 'data-state': state, onclick: () => ((filter = state), void refresh()) }, `${state} ${n}`),
        ),
      );
    }
    const shown = filter === '' ? sessions : sessions.filter((s) => s.state === filter);
    main.querySelector('[data-testid="sessions-count"]').textContent = `(${shown.length})`;
    fill(tbody, 
      ...shown.map((s) =>
        h(
          'tr',
          { 'data-session-id': s.sessionId },
          h('td', { class: 'id' }, h('a', { href: `/sessions/${encodeURIComponent(s.sessionId)}`, class: 'mono', title: s.sessionId, onclick: link }, s.sessionId)),
          h('td', { 'data-testid': 'agent' }, s.agent),
          h('td', {}, badge(s.state), s.awaitingApproval ? [' ', h('span', { class: 'category', 'data-testid': 'awaiting-approval' }, 'awaiting approval')] : null),
          h('td', {}, s.turn ? `#${s.turn.index} ${s.turn.status}` : '–'),
          h('td', {}, s.turn ? String(s.turn.attempts) : '–', s.lastFailure ? [' ', h('span', { class: 'category', title: 'last failure' }, s.lastFailure.category)] : null),
          h('td', {}, s.nextRetryAt ? `in ${ms(Math.max(0, s.nextRetryAt - Date.now()))}` : '–'),
          h('td', { title: new Date(s.updatedAt).toISOString() }, ago(s.updatedAt)),
          h('td', { class: 'prompt', title: s.turn?.prompt ?? '' }, s.turn?.prompt ?? ''),
        ),
      ),
    );
    if (shown.length === 0) tbody.append(h('tr', {}, h('td', { colspan: 8, class: 'muted' }, 'No sessions yet. Start one with the form.')));
  }
  return poll(refresh, 1000);
}

// ---------------------------------------------------------------------------------------------
// Session page
// ---------------------------------------------------------------------------------------------

function sessionPage(main, sessionId) {
  const enc = encodeURIComponent(sessionId);
  const title = h('h1', { 'data-testid': 'session-id' }, sessionId);
  const facts = h('div', { class: 'facts' });
  const stateEl = h('span', { 'data-testid': 'session-state' });
  const cancelButton = h('button', { type: 'button', class: 'danger', 'data-testid': 'cancel', onclick: cancel }, 'Cancel turn');
  const cancelNote = h('span', { class: 'muted', 'data-testid': 'cancel-note' });
  const deleteButton = h('button', { type: 'button', class: 'danger', 'data-testid': 'delete', onclick: remove }, 'Delete session');
  const chartBox = h('div', { class: 'chart', 'data-testid': 'chart' }, h('p', { class: 'muted' }, 'Loading the statechart…'));
  const timeline = h('ol', { class: 'timeline', 'data-testid': 'timeline' });
  const timelineTitle = h('span', { class: 'muted' });
  const historyBody = h('tbody');
  const liveDot = h('span', { class: 'live-dot', title: 'live stream' });
  const transcript = h('div', { class: 'transcript', 'data-testid': 'transcript' });
  const approvalsPanel = h('section', { class: 'panel', 'data-testid': 'approvals', hidden: true });

  const promptInput = h('textarea', { name: 'prompt', placeholder: 'Next prompt (waits for the current turn)' });
  const promptForm = h(
    'form',
    { class: 'stack', novalidate: true, 'data-testid': 'prompt-form' },
    field('prompt', 'prompt', promptInput),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Send prompt'), h('span', { class: 'form-error' }), h('span', { class: 'form-ok' })),
  );
  promptForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    const result = await api('POST', `/api/sessions/${enc}/prompts`, { prompt: promptInput.value });
    if (!result.ok) return showIssues(promptForm, result);
    clearIssues(promptForm);
    promptInput.value = '';
    promptForm.querySelector('.form-ok').textContent = `queued as turn ${result.data.turn}`;
  });

  const policy = policyEditor({ path: `/api/sessions/${enc}/retry-policy`, title: 'Retry policy of this session', allowReset: 'Follow the global policy' });

  fill(main, 
    h('section', { class: 'panel summary' }, h('div', {}, title, facts), h('div', { class: 'actions' }, cancelNote, can('write') ? cancelButton : null, can('admin') ? deleteButton : null)),
    approvalsPanel,
    h('section', { class: 'panel' }, h('h2', {}, 'Statechart ', h('span', { class: 'muted' }, '(current state filled; dashed: reached only when a worker restores a session)')), chartBox),
    h('div', { class: 'grid' },
      h('div', {},
        h('section', { class: 'panel' }, h('h2', {}, 'Attempts ', timelineTitle), timeline),
        h('section', { class: 'panel' }, h('details', {}, h('summary', {}, 'Transition history'), h('table', {}, h('thead', {}, h('tr', {}, ['at', 'from', 'to', 'event'].map((t) => h('th', {}, t)))), historyBody))),
      ),
      h('div', {},
        h('section', { class: 'panel' }, h('h2', {}, liveDot, 'Transcript'), transcript),
        can('write') ? h('section', { class: 'panel' }, h('h2', {}, 'Add a prompt'), promptForm) : null,
        policy.panel,
      ),
    ),
  );

  let chart = null;
  let current = null;
  let stream = null;
  void api('GET', '/api/chart').then((r) => {
    if (!r.ok) return;
    chart = r.data;
    drawChart();
  });

  function drawChart() {
    if (chart === null) return;
    fill(chartBox, renderChart(chart, current === 'queued' ? 'idle' : current));
  }

  async function cancel() {
    cancelButton.disabled = true;
    const result = await api('POST', `/api/sessions/${enc}/cancel`, { reason: 'cancelled from the dashboard' });
    cancelNote.textContent = result.ok ? `cancel sent (${result.data.delivered})` : (result.data?.error ?? `cancel failed (HTTP ${result.status})`);
  }

  // Deletes the session everywhere (a running turn is cancelled first), after the operator confirms.
  async function remove() {
    if (!window.confirm(`Delete session ${sessionId}? Its messages and agent state are removed everywhere; a running turn is cancelled first.`)) return;
    deleteButton.disabled = true;
    const result = await api('DELETE', `/api/sessions/${enc}?force=true`);
    if (result.ok) return navigate('/');
    deleteButton.disabled = false;
    cancelNote.textContent = result.data?.error ?? `delete failed (HTTP ${result.status})`;
  }

  async function refresh() {
    const result = await api('GET', `/api/sessions/${enc}`);
    if (!result.ok) {
      fill(facts, h('span', { class: 'form-error' }, result.status === 404 ? 'Unknown session.' : (result.data?.error ?? 'cannot load the session')));
      return;
    }
    const view = result.data;
    if (view.state !== current) {
      current = view.state;
      drawChart();
    }
    fill(stateEl, badge(view.state));
    const turn = view.turn;
    fill(facts, 
      h('span', {}, 'state ', stateEl),
      h('span', {}, 'agent ', h('b', { 'data-testid': 'session-agent' }, view.agent)),
      h('span', {}, 'turn ', h('b', {}, turn ? `#${turn.index} ${turn.status}` : '–')),
      turn?.failureReason ? h('span', {}, 'failure ', h('b', {}, turn.failureReason)) : null,
      view.nextRetryAt ? h('span', {}, 'next attempt ', h('b', {}, `in ${ms(Math.max(0, view.nextRetryAt - Date.now()))}`)) : null,
      view.queuedPrompts > 0 ? h('span', {}, 'queued prompts ', h('b', {}, String(view.queuedPrompts))) : null,
      view.heldBy ? h('span', {}, 'worker ', h('b', { class: 'mono' }, view.heldBy)) : null,
      h('span', {}, 'messages ', h('b', {}, String(view.lastSeq))),
    );
    cancelButton.disabled = (SETTLED.has(view.state) && view.queuedPrompts === 0) || view.state === 'cancelling' || view.cancelRequested;
    if (turn && (turn.status === 'cancelled' || turn.status === 'failed') && view.queuedPrompts === 0) stream?.closeTools(turn.status);
    renderTimeline(view);
    renderApprovals(view.approvals ?? []);
    fill(historyBody, 
      ...view.history.slice(-50).reverse().map((t) => h('tr', {}, h('td', {}, clock(t.at)), h('td', {}, t.from), h('td', {}, t.to), h('td', { class: 'mono' }, t.event))),
    );
  }

  /** The agent's permission requests waiting for an operator, with Allow / Deny (write scope). */
  function renderApprovals(approvals) {
    approvalsPanel.hidden = approvals.length === 0;
    fill(approvalsPanel,
      h('h2', {}, 'Awaiting approval'),
      ...approvals.map((a) => {
        const note = h('span', { class: 'muted' });
        const decide = async (decision) => {
          const result = await api('POST', `/api/sessions/${enc}/approvals/${encodeURIComponent(a.requestId)}`, { decision });
          note.textContent = result.ok ? `${result.data.outcome} by ${result.data.by}` : (result.data?.error ?? `failed (HTTP ${result.status})`);
        };
        const decided = a.decision ? h('span', { class: 'muted' }, `${a.decision.outcome} by ${a.decision.by}: given to the agent when it asks again`) : null;
        return h('div', { class: 'approval', 'data-testid': 'approval', 'data-request-id': a.requestId },
          h('b', {}, a.tool), a.kind ? h('span', { class: 'muted' }, ` (${a.kind})`) : null, ' ', h('code', {}, preview(a.arguments, 300)),
          h('div', { class: 'muted' }, `options: ${a.options.map((o) => o.name).join(', ')} · denied ${ms(Math.max(0, a.deadlineAt - Date.now()))} from now unless answered`),
          decided ?? (can('write') ? h('div', { class: 'actions' },
            h('button', { type: 'button', class: 'primary', 'data-testid': 'approve', onclick: () => decide('allow') }, 'Allow once'),
            h('button', { type: 'button', class: 'danger', 'data-testid': 'deny', onclick: () => decide('deny') }, 'Deny'),
            note) : null),
        );
      }),
    );
  }

  function renderTimeline(view) {
    const turn = view.turn;
    if (!turn) {
      timelineTitle.textContent = '';
      fill(timeline, h('li', { class: 'muted' }, 'No turn yet.'));
      return;
    }
    timelineTitle.textContent = `(turn #${turn.index}, ${turn.status})`;
    const items = [];
    if (turn.prompt) items.push(h('li', { class: 'muted' }, `prompt: ${preview(turn.prompt, 200)}`));
    for (const a of turn.attempts) {
      const outcome = a.outcome ?? 'running';
      const took = a.endedAt ? ms(a.endedAt - a.startedAt) : `running for ${ms(Date.now() - a.startedAt)}`;
      items.push(
        h(
          'li',
          { class: `attempt outcome-${outcome}`, 'data-testid': 'attempt', 'data-attempt': a.attempt, 'data-outcome': outcome, 'data-category': a.category ?? '' },
          h('div', {}, h('span', { class: 'what' }, `Attempt ${a.attempt}`), ` · ${outcome}`, a.category ? [' · ', h('span', { class: 'category' }, a.category)] : null, ` · ${took}`, h('span', { class: 'muted' }, ` · started ${clock(a.startedAt)}`)),
          a.errorText ? h('div', { class: 'err' }, preview(a.errorText, 300)) : null,
        ),
      );
      if (a.delayMs !== undefined && a.delayMs !== null) {
        items.push(h('li', { class: 'backoff', 'data-testid': 'backoff', 'data-delay-ms': a.delayMs }, `backoff ${ms(a.delayMs)} before attempt ${a.attempt + 1}`));
      }
    }
    if (turn.status === 'cancelled') items.push(h('li', { class: 'muted' }, `cancelled${turn.cancelReason ? `: ${turn.cancelReason}` : ''}`));
    if (turn.status === 'failed') items.push(h('li', { class: 'muted' }, `turn failed: ${turn.failureReason ?? ''}`));
    if (turn.status === 'completed') items.push(h('li', { class: 'muted' }, 'turn completed'));
    fill(timeline, ...items);
  }

  stream = streamTranscript(sessionId, transcript, liveDot);
  const stopPoll = poll(refresh, 1000);
  return () => {
    stream.stop();
    stopPoll();
  };
}

/**
 * The live transcript: SSE from /api/sessions/:id/events. With a login, the stream is opened with a
 * short-lived stream ticket (EventSource sends no headers); EventSource resumes with Last-Event-ID
 * while the ticket holds; once the server refuses it (expired), a new ticket resumes after lastSeq.
 */
function streamTranscript(sessionId, box, liveDot) {
  let lastSeq = 0;
  let turn = null;
  let attempt = null;
  let assistantEl = null;
  let stopped = false;
  let source = null;
  let retryTimer = null;
  const tools = new Map();
  const enc = encodeURIComponent(sessionId);

  async function open() {
    if (stopped) return;
    let url = `/api/sessions/${enc}/events?from=${lastSeq + 1}`;
    if (me !== null && me.via !== 'open') {
      const ticket = await api('POST', `/api/sessions/${enc}/stream-ticket`);
      if (!ticket.ok) {
        if (ticket.status !== 401) retryTimer = setTimeout(open, 2000);
        return;
      }
      url = `${ticket.data.url}&from=${lastSeq + 1}`;
    }
    if (stopped) return;
    source = new EventSource(url);
    box.dataset.streams = String(Number(box.dataset.streams ?? 0) + 1);
    source.addEventListener('open', () => liveDot.classList.add('on'));
    source.addEventListener('error', () => {
      liveDot.classList.remove('on');
      // CONNECTING: EventSource reconnects by itself (Last-Event-ID). CLOSED: refused (the ticket expired): a new one.
      if (source.readyState === EventSource.CLOSED && !stopped) {
        source.close();
        retryTimer = setTimeout(open, 200);
      }
    });
    for (const type of MESSAGE_TYPES) source.addEventListener(type, onMessage);
    source.addEventListener('message', onMessage);
  }

  const add = (el) => {
    const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
    box.append(el);
    if (atBottom) box.scrollTop = box.scrollHeight;
    return el;
  };

  const onMessage = (event) => {
    let m;
    try {
      m = JSON.parse(event.data);
    } catch {
      return;
    }
    if (typeof m.seq !== 'number' || m.seq <= lastSeq) return;
    lastSeq = m.seq;
    box.dataset.lastSeq = String(m.seq);
    if (m.turn !== turn) {
      turn = m.turn;
      attempt = null;
      add(h('div', { class: 'turn' }, `Turn ${m.turn}`));
    }
    if (m.attempt !== attempt) {
      attempt = m.attempt;
      assistantEl = null;
      add(h('div', { class: 'attempt', 'data-testid': 'transcript-attempt' }, `attempt ${m.attempt}${m.attempt > 1 ? ' (retry)' : ''}`));
    }
    const c = m.content ?? {};
    switch (m.type) {
      case 'assistant':
        assistantEl ??= add(h('div', { class: 'assistant', 'data-testid': 'assistant-text' }));
        assistantEl.append(document.createTextNode(c.text ?? ''));
        break;
      case 'assistant.thought':
        add(h('div', { class: 'thought' }, c.text ?? ''));
        assistantEl = null;
        break;
      case 'approval.requested':
        add(h('div', { class: 'thought', 'data-testid': 'approval-requested' }, `${c.tool ?? 'tool'} asks permission${c.reasked ? ' (asked again)' : ''}`));
        assistantEl = null;
        break;
      case 'approval.decided':
        add(h('div', { class: 'thought', 'data-testid': 'approval-decided' }, `${c.outcome} by ${c.by}${c.reason ? `: ${c.reason}` : ''}`));
        assistantEl = null;
        break;
      case 'tool.call': {
        const status = h('span', { class: 'status' }, 'running');
        const args = h('code', {}, preview(c.arguments, 200));
        const el = add(h('div', { class: 'tool running', 'data-testid': 'tool', 'data-tool': c.name ?? '' }, status, ' ', h('b', {}, c.name ?? 'tool'), ' ', args));
        tools.set(c.toolCallId, { el, status, args, open: true });
        assistantEl = null;
        break;
      }
      case 'tool.completed':
      case 'tool.failed': {
        const tool = tools.get(c.toolCallId);
        const ok = m.type === 'tool.completed';
        const el = tool?.el ?? add(h('div', { class: 'tool' }, h('span', { class: 'status' }), ' ', h('b', {}, c.name ?? 'tool')));
        el.classList.remove('running');
        el.classList.add(ok ? 'completed' : 'failed');
        el.querySelector('.status').textContent = ok ? 'done' : 'failed';
        if (tool) tool.open = false;
        const out = preview(ok ? c.result : c.error, 400);
        if (out) el.append(h('pre', {}, out));
        break;
      }
      case 'tool.update': {
        const tool = tools.get(c.toolCallId);
        if (tool && c.arguments !== undefined) tool.args.textContent = preview(c.arguments, 200);
        break;
      }
      case 'session.started':
      case 'session.resumed':
        add(h('div', { class: 'meta' }, `${m.type === 'session.started' ? 'agent session started' : 'agent session resumed'}${c.sessionId ? ` (${c.sessionId})` : ''}`));
        break;
      case 'agent.retry':
        add(h('div', { class: 'meta' }, `the agent retried on its own (${c.phase ?? ''}${c.errorText ? `: ${c.errorText}` : ''})`));
        break;
      case 'terminal.completed':
        closeTools('ended');
        add(h('div', { class: 'end-ok', 'data-testid': 'terminal' }, `attempt ${m.attempt} completed (${c.stopReason ?? 'stop'})`));
        assistantEl = null;
        break;
      case 'terminal.failed':
        closeTools('ended');
        add(h('div', { class: 'end-bad', 'data-testid': 'terminal' }, `attempt ${m.attempt} failed · `, h('span', { class: 'category' }, c.category ?? 'unknown'), ` ${preview(c.text ?? '', 300)}`));
        assistantEl = null;
        break;
      default:
        add(h('div', { class: 'meta' }, `${m.type}: ${preview(c, 200)}`));
    }
  };
  /** Tool calls still open when their attempt ended (no terminal message after a cancel): marked with `why`. */
  function closeTools(why) {
    for (const tool of tools.values()) {
      if (!tool.open) continue;
      tool.open = false;
      tool.el.classList.remove('running');
      tool.el.classList.add('failed');
      tool.status.textContent = why;
    }
  }
  void open();
  return {
    stop: () => {
      stopped = true;
      clearTimeout(retryTimer);
      source?.close();
    },
    closeTools,
  };
}

// ---------------------------------------------------------------------------------------------
// Statechart: states as boxes in columns by distance from the initial state,
// forward transitions as curves with their event [guard], backward ones routed
// over the top (one lane per target and event). States reached only on restore
// (no path from the initial state) are drawn dashed.
// ---------------------------------------------------------------------------------------------

function renderChart(chart, current) {
  const BOX_W = 140;
  const BOX_H = 44;
  const COL = 360;
  const ROW = 62;
  const LANE = 18;
  const names = chart.states.map((st) => st.name);
  const edges = [];
  for (const st of chart.states) {
    for (const t of st.transitions) {
      if (!t.target) continue;
      const existing = edges.find((e) => e.from === st.name && e.to === t.target);
      const label = t.guard ? `${t.event} [${t.guard}]` : t.event;
      if (existing) {
        if (!existing.labels.includes(label)) existing.labels.push(label);
      } else edges.push({ from: st.name, to: t.target, labels: [label] });
    }
  }

  // Columns: BFS depth from the initial state; a state reached only on restore sits one column before its nearest target.
  const depth = new Map([[chart.initial ?? names[0], 0]]);
  const queue = [chart.initial ?? names[0]];
  while (queue.length > 0) {
    const from = queue.shift();
    for (const e of edges) {
      if (e.from !== from || depth.has(e.to)) continue;
      depth.set(e.to, depth.get(from) + 1);
      queue.push(e.to);
    }
  }
  const reachable = new Set(depth.keys());
  for (const name of names) {
    if (depth.has(name)) continue;
    const targets = edges.filter((e) => e.from === name && depth.has(e.to)).map((e) => depth.get(e.to));
    depth.set(name, targets.length > 0 ? Math.max(0, Math.min(...targets) - 1) : 0);
  }
  const columns = new Map();
  for (const name of [...names.filter((n) => reachable.has(n)), ...names.filter((n) => !reachable.has(n))]) {
    const d = depth.get(name);
    if (!columns.has(d)) columns.set(d, []);
    columns.get(d).push(name);
  }

  // Backward edges share a lane per (target, label).
  const lanes = [];
  for (const e of edges) {
    if (e.from === e.to || depth.get(e.to) > depth.get(e.from)) continue;
    const key = `${e.to}|${e.labels.join(', ')}`;
    let lane = lanes.find((l) => l.key === key);
    if (!lane) lanes.push((lane = { key, to: e.to, label: e.labels.join(', '), sources: [] }));
    lane.sources.push(e.from);
    e.lane = lane;
  }
  const TOP = 24 + lanes.length * LANE;
  const pos = new Map();
  for (const [d, col] of columns) col.forEach((name, row) => pos.set(name, { x: 16 + d * COL, y: TOP + row * ROW }));
  const maxRows = Math.max(...[...columns.values()].map((c) => c.length));
  const width = 16 + Math.max(...columns.keys()) * COL + BOX_W + 90;
  const height = TOP + (maxRows - 1) * ROW + BOX_H + 12;

  const root = s('svg', { viewBox: `0 0 ${width} ${height}`, width, height, role: 'img', 'aria-label': 'session statechart', 'data-testid': 'chart-svg' });
  const marker = (id, cls) => s('marker', { id, class: cls, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' }, s('path', { d: 'M0,0 L10,5 L0,10 z' }));
  root.append(s('defs', {}, marker('arrow', ''), marker('arrow-live', 'live')));
  const edgeLayer = s('g', {});
  const labelLayer = s('g', {});
  root.append(edgeLayer, labelLayer);

  const label = (lines, x, y, anchor, live, restore) =>
    s('text', { x, y, 'text-anchor': anchor, class: `label${live ? ' live' : ''}${restore ? ' restore' : ''}` }, ...lines.map((line, i) => s('tspan', { x, dy: i === 0 ? 0 : 12 }, line)));
  const path = (d, live, restore, attrs = {}) => s('path', { d, class: `${live ? 'live' : ''}${restore ? ' restore' : ''}`, 'marker-end': `url(#${live ? 'arrow-live' : 'arrow'})`, ...attrs });

  // Ports: a state's outgoing forward edges leave its right side spread out in target order, incoming ones arrive spread on its left.
  const forward = edges.filter((x) => !x.lane && x.from !== x.to);
  const port = (list, name, key, other) => {
    const mine = list.filter((x) => x[key] === name).sort((p, q) => pos.get(p[other]).y - pos.get(q[other]).y);
    return (e) => pos.get(name).y + (BOX_H * (mine.indexOf(e) + 1)) / (mine.length + 1);
  };
  // Labels go where they overlap no state and no other label: along the curve, middle first.
  const placed = [...pos.values()].map((p) => ({ x1: p.x - 2, y1: p.y - 2, x2: p.x + BOX_W + 2, y2: p.y + BOX_H + 2 }));
  const free = (box) => placed.every((o) => box.x2 < o.x1 || box.x1 > o.x2 || box.y2 < o.y1 || box.y1 > o.y2);
  const labelBox = (text, x, y, anchor) => {
    const w = text.length * 6.1;
    const x1 = anchor === 'middle' ? x - w / 2 : anchor === 'end' ? x - w : x;
    return { x1, y1: y - 11, x2: x1 + w, y2: y + 3 };
  };

  lanes.forEach((lane, i) => {
    const b = pos.get(lane.to);
    const y = TOP - 12 - i * LANE;
    const tx = b.x + BOX_W / 2 + 24 - i * 16;
    const live = lane.sources.includes(current);
    const g = s('g', { class: `edge back${live ? ' live' : ''}`, 'data-to': lane.to });
    let far = tx;
    for (const from of lane.sources) {
      const a = pos.get(from);
      const gap = a.x - 14 - i * 6;
      const y1 = a.y + BOX_H / 2;
      far = Math.max(far, gap);
      g.append(s('path', { d: `M${a.x},${y1} L${gap},${y1} L${gap},${y}`, class: `${from === current ? 'live' : ''}${reachable.has(from) ? '' : ' restore'}` }));
    }
    g.append(path(`M${far},${y} L${tx},${y} L${tx},${b.y}`, live, false));
    edgeLayer.append(g);
    labelLayer.append(label([lane.label], (far + tx) / 2, y - 4, 'middle', live, false));
    placed.push(labelBox(lane.label, (far + tx) / 2, y - 4, 'middle'));
  });

  for (const e of edges.filter((x) => x.from === x.to)) {
    const a = pos.get(e.from);
    const live = e.from === current;
    const restore = !reachable.has(e.from);
    const x = a.x + BOX_W;
    const text = e.labels.join(', ');
    edgeLayer.append(s('g', { class: `edge${live ? ' live' : ''}`, 'data-from': e.from, 'data-to': e.to }, path(`M${x - 24},${a.y} C${x - 10},${a.y - 26} ${x + 30},${a.y - 6} ${x},${a.y + 12}`, live, restore)));
    labelLayer.append(label([text], x + 6, a.y - 10, 'start', live, restore));
    placed.push(labelBox(text, x + 6, a.y - 10, 'start'));
  }

  const ordered = [...forward].sort((p, q) => Number(reachable.has(q.from)) - Number(reachable.has(p.from)));
  for (const e of ordered) {
    const a = pos.get(e.from);
    const b = pos.get(e.to);
    const live = e.from === current;
    const restore = !reachable.has(e.from);
    const x1 = a.x + BOX_W;
    const y1 = port(forward, e.from, 'from', 'to')(e);
    const x2 = b.x;
    const y2 = port(forward, e.to, 'to', 'from')(e);
    const mx = (x1 + x2) / 2;
    edgeLayer.append(s('g', { class: `edge${live ? ' live' : ''}`, 'data-from': e.from, 'data-to': e.to }, path(`M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`, live, restore)));
    const text = e.labels.join(', ');
    const at = (t) => {
      const u = 1 - t;
      return { x: u * u * u * x1 + 3 * u * u * t * mx + 3 * u * t * t * mx + t * t * t * x2, y: u * u * u * y1 + 3 * u * u * t * y1 + 3 * u * t * t * y2 + t * t * t * y2 };
    };
    let best = null;
    for (const t of [0.5, 0.4, 0.6, 0.3, 0.7, 0.2, 0.8, 0.12, 0.88]) {
      const p = at(t);
      for (const dy of [-4, 13, -16]) {
        const box = labelBox(text, p.x, p.y + dy, 'middle');
        if (free(box)) {
          best = { x: p.x, y: p.y + dy, box };
          break;
        }
      }
      if (best) break;
    }
    if (!best) {
      const p = at(0.5);
      best = { x: p.x, y: p.y - 4, box: labelBox(text, p.x, p.y - 4, 'middle') };
    }
    placed.push(best.box);
    labelLayer.append(label([text], best.x, best.y, 'middle', live, restore));
  }


  for (const name of names) {
    const p = pos.get(name);
    const st = chart.states.find((x) => x.name === name);
    const cls = ['state', name === current ? 'current' : '', reachable.has(name) ? '' : 'restore', name === chart.initial ? 'initial' : ''].filter(Boolean).join(' ');
    const invokes = st?.invokes ?? [];
    root.append(
      s('g', { class: cls, 'data-state': name, 'data-current': name === current ? 'true' : 'false' },
        s('rect', { x: p.x, y: p.y, width: BOX_W, height: BOX_H, rx: 8 }),
        s('text', { class: 'name', x: p.x + BOX_W / 2, y: p.y + (invokes.length > 0 ? 19 : 27), 'text-anchor': 'middle' }, name),
        invokes.length > 0 ? s('text', { class: 'invoke', x: p.x + BOX_W / 2, y: p.y + 35, 'text-anchor': 'middle' }, `invoke ${invokes.join(', ')}`) : null,
      ),
    );
  }
  return root;
}

// ---------------------------------------------------------------------------------------------
// Shell: token, polling, routing
// ---------------------------------------------------------------------------------------------

function poll(fn, everyMs) {
  let stopped = false;
  let timer = null;
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

let stopPage = () => {};

function route() {
  stopPage();
  stopPage = () => {};
  const main = document.getElementById('main');
  renderWho();
  if (me === null) return loginPage(main);
  const match = /^\/sessions\/([^/]+)\/?$/.exec(location.pathname);
  stopPage = match ? sessionPage(main, decodeURIComponent(match[1])) : homePage(main);
  document.title = match ? `${decodeURIComponent(match[1])} · sessiond` : 'sessiond';
}

function navigate(path) {
  history.pushState(null, '', path);
  route();
}

function link(event) {
  if (event.metaKey || event.ctrlKey || event.shiftKey || event.button !== 0) return;
  event.preventDefault();
  navigate(event.currentTarget.getAttribute('href'));
}

/** The header's "who am I" and logout. */
function renderWho() {
  const queue = document.querySelector('[data-testid="queue-link"]');
  if (queue) queue.setAttribute('href', me !== null && me.via !== 'open' && can('admin') ? '/queues-admin' : '/queues');
  const box = document.getElementById('who');
  if (!box) return;
  if (me === null || me.via === 'open') return fill(box);
  fill(box, h('span', { 'data-testid': 'who' }, `${me.name} · ${me.scope}`), ' ', h('button', { type: 'button', class: 'secondary', 'data-testid': 'logout', onclick: logout }, 'Log out'));
}

async function logout() {
  await api('POST', '/api/logout');
  me = null;
  route();
}

function loginPage(main) {
  const input = h('input', { type: 'password', name: 'token', autocomplete: 'off', 'data-testid': 'login-token' });
  const form = h(
    'form',
    { class: 'stack', 'data-testid': 'login-form', novalidate: true },
    field('API token', 'token', input, 'exchanged once for a login cookie; the page never keeps it'),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', 'data-testid': 'login' }, 'Log in'), h('span', { class: 'form-error' })),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const result = await api('POST', '/api/login', { token: input.value.trim() });
    input.value = '';
    if (!result.ok) return showIssues(form, result);
    me = result.data;
    route();
  });
  fill(main, h('section', { class: 'panel login' }, h('h1', {}, 'Log in'), h('p', { class: 'muted' }, 'This sessiond needs a token to read or change anything.'), form));
}

async function start() {
  const who = await api('GET', '/api/whoami');
  me = who.ok ? who.data : null;
  route();
}

window.addEventListener('popstate', route);
void start();
