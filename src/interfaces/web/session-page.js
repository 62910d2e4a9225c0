// @ts-check
import { api, can, clearIssues, showIssues, showOk } from './api.js';
import { renderChart } from './chart-draw.js';
import { ago, badge, clock, field, fill, h, ms, poll, preview } from './dom.js';
import { link, navigate } from './nav.js';
import { policyEditor } from './policy-editor.js';
import { streamTranscript } from './transcript.js';
import { workspacePanel } from './workspace-panel.js';
import { SETTLED } from './vocabulary.js';

/**
 * One session. Asked for once first: an id the API does not know gets "no such session" and
 * nothing else (no buttons, no event stream, no polling).
 * @param {HTMLElement} main
 * @param {string} sessionId
 * @returns {() => void} stops the page's polling and stream
 */
export function sessionPage(main, sessionId) {
  let stopped = false;
  let stop = () => {};
  fill(main, h('p', { class: 'muted' }, 'Loading the session…'));
  void api('GET', `/api/sessions/${encodeURIComponent(sessionId)}`).then((result) => {
    if (stopped) return;
    if (result.status === 404) return noSuchSession(main, sessionId);
    stop = sessionView(main, sessionId);
  });
  return () => {
    stopped = true;
    stop();
  };
}

/** What each whenBusy strategy does, as the prompt form's menu says it. @type {Record<string, string>} */
const STRATEGY_LABELS = {
  enqueue: 'wait in the queue',
  steer: 'steer the running turn',
  interrupt: 'interrupt the running turn',
  reject: 'refuse the prompt',
  rollback: 'roll back the running turn',
};

/** How the form reads while a turn runs and a strategy acting on it is chosen. @type {Record<string, string>} */
const RUNNING_LABELS = {
  steer: 'Steer the running turn',
  interrupt: 'Interrupt the running turn',
  rollback: 'Roll back the running turn',
};

/** @param {string} strategy */
function strategyOption(strategy) {
  return h('option', { value: strategy }, STRATEGY_LABELS[strategy] ?? strategy);
}

/** @param {HTMLElement} main @param {string} sessionId */
function noSuchSession(main, sessionId) {
  fill(
    main,
    h(
      'section',
      { class: 'panel', 'data-testid': 'no-such-session' },
      h('h1', {}, 'No such session'),
      h('p', {}, 'There is no session ', h('code', {}, sessionId), ' (never created, or deleted).'),
      h('p', {}, h('a', { href: '/', onclick: link }, 'Back to the sessions')),
    ),
  );
}

/**
 * One session: its summary, path taken, statechart, attempts, transcript, prompts and retry policy.
 * @param {HTMLElement} main
 * @param {string} sessionId
 * @returns {() => void} stops the page's polling and stream
 */
function sessionView(main, sessionId) {
  const enc = encodeURIComponent(sessionId);
  const title = h('h1', { 'data-testid': 'session-id' }, sessionId);
  const facts = h('div', { class: 'facts' });
  const stateEl = h('span', { 'data-testid': 'session-state' });
  const cancelButton = h(
    'button',
    { type: 'button', class: 'danger', 'data-testid': 'cancel', onclick: cancel },
    'Cancel turn',
  );
  const cancelNote = h('span', { class: 'muted', 'data-testid': 'cancel-note' });
  const deleteButton = h(
    'button',
    { type: 'button', class: 'danger', 'data-testid': 'delete', onclick: remove },
    'Delete session',
  );
  const retryButton = h(
    'button',
    { type: 'button', class: 'secondary', 'data-testid': 'retry', onclick: retry, disabled: true },
    'Retry failed turn',
  );
  const resumeButton = h(
    'button',
    { type: 'button', class: 'secondary', 'data-testid': 'resume-parked', onclick: resume, hidden: true },
    'Resume now',
  );
  const queueList = h('ol', { class: 'queue', 'data-testid': 'queued-prompts' });
  const noWorker = h('p', { class: 'notice', 'data-testid': 'no-worker-notice', hidden: true });
  const promptsList = h('ol', { class: 'prompts', 'data-testid': 'prompts' });
  const approvalsPanel = h('section', { class: 'panel', 'data-testid': 'approvals', hidden: true });
  const queuePanel = h('section', { class: 'panel', hidden: true }, h('h2', {}, 'Queued prompts'), queueList);
  const chartBox = h(
    'div',
    { class: 'chart', 'data-testid': 'chart' },
    h('p', { class: 'muted' }, 'Loading the statechart…'),
  );
  const pathList = h('ol', { class: 'path', 'data-testid': 'path' });
  const pathTitle = h('span', { class: 'muted' });
  const timeline = h('ol', { class: 'timeline', 'data-testid': 'timeline' });
  const timelineTitle = h('span', { class: 'muted' });
  const historyBody = h('tbody');
  const liveDot = h('span', { class: 'live-dot', title: 'live stream' });
  const transcript = h('div', { class: 'transcript', 'data-testid': 'transcript' });

  const promptInput = h('textarea', { name: 'prompt', placeholder: 'Next prompt (waits for the current turn)' });
  // What the prompt does if a turn runs (whenBusy): only the strategies this deployment offers (GET /api/deployment-policy).
  const strategySelect = h(
    'select',
    { name: 'whenBusy', 'data-testid': 'prompt-when-busy' },
    strategyOption('enqueue'),
  );
  const strategyField = field('if a turn runs', 'whenBusy', strategySelect);
  strategyField.hidden = true;
  const promptTitle = h('h2', { 'data-testid': 'prompt-title' }, 'Add a prompt');
  const promptSubmit = h('button', { type: 'submit', class: 'primary', 'data-testid': 'prompt-send' }, 'Send prompt');
  /** A turn is in progress (the state a whenBusy strategy acts on), as of the last refresh. */
  let turnRuns = false;
  const relabelPrompt = () => {
    const label = turnRuns ? RUNNING_LABELS[strategySelect.value] : undefined;
    promptTitle.textContent = label ?? 'Add a prompt';
    promptSubmit.textContent = label === undefined ? 'Send prompt' : `${label}: send`;
  };
  strategySelect.addEventListener('change', relabelPrompt);
  void api('GET', '/api/deployment-policy').then((result) => {
    /** @type {string[]} */
    const offered = result.ok && Array.isArray(result.data?.whenBusyOffered) ? result.data.whenBusyOffered : [];
    if (offered.length < 2) return;
    fill(strategySelect, ...offered.map(strategyOption));
    strategyField.hidden = false;
  });
  const promptForm = h(
    'form',
    { class: 'stack', novalidate: true, 'data-testid': 'prompt-form' },
    field('prompt', 'prompt', promptInput),
    strategyField,
    h('div', { class: 'actions' }, promptSubmit, h('span', { class: 'form-error' }), h('span', { class: 'form-ok' })),
  );
  promptForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    const whenBusy = strategySelect.value;
    const result = await api('POST', `/api/sessions/${enc}/prompts`, {
      prompt: promptInput.value,
      ...(whenBusy === 'enqueue' || whenBusy === '' ? {} : { whenBusy }),
    });
    if (!result.ok) return showIssues(promptForm, result);
    clearIssues(promptForm);
    promptInput.value = '';
    // A steer that went into the running turn has no turn of its own: its promptId is what inspect lists.
    showOk(
      promptForm,
      result.data.steered === true
        ? `steered into turn ${result.data.turn} (${result.data.promptId})`
        : `queued as turn ${result.data.turn}`,
    );
  });

  const workspace = workspacePanel(sessionId);

  const policy = policyEditor({
    path: `/api/sessions/${enc}/retry-policy`,
    title: 'Retry policy of this session',
    allowReset: 'Follow the global retry policy',
  });

  fill(
    main,
    h(
      'section',
      { class: 'panel summary' },
      h('div', {}, title, facts, noWorker),
      h(
        'div',
        { class: 'actions' },
        cancelNote,
        can('write') ? resumeButton : null,
        can('write') ? retryButton : null,
        can('write') ? cancelButton : null,
        can('admin') ? deleteButton : null,
      ),
    ),
    approvalsPanel,
    h(
      'section',
      { class: 'panel' },
      h('h2', {}, 'Path taken ', pathTitle),
      pathList,
      h(
        'details',
        { class: 'chart-details', 'data-testid': 'chart-details' },
        h(
          'summary',
          {},
          'Full statechart ',
          h(
            'span',
            { class: 'muted' },
            '(current state filled; green: the path taken; blue: where it can go next; dashed: reached only when a worker restores a session)',
          ),
        ),
        chartBox,
      ),
    ),
    h(
      'div',
      { class: 'grid' },
      h(
        'div',
        {},
        h('section', { class: 'panel' }, h('h2', {}, 'Attempts ', timelineTitle), timeline),
        h('section', { class: 'panel' }, h('h2', {}, 'Prompts'), promptsList),
        h(
          'section',
          { class: 'panel' },
          h(
            'details',
            {},
            h('summary', {}, 'Transition history'),
            h(
              'table',
              {},
              h(
                'thead',
                {},
                h(
                  'tr',
                  {},
                  ['at', 'from', 'to', 'event'].map((t) => h('th', {}, t)),
                ),
              ),
              historyBody,
            ),
          ),
        ),
      ),
      h(
        'div',
        {},
        h('section', { class: 'panel' }, h('h2', {}, liveDot, 'Transcript'), transcript),
        workspace.panel,
        queuePanel,
        can('write') ? h('section', { class: 'panel' }, promptTitle, promptForm) : null,
        policy.panel,
      ),
    ),
  );

  /** @type {import('./chart-layout.js').Chart | null} */
  let chart = null;
  /** @type {string | null} */
  let current = null;
  /** The path taken's transitions (`from>to`), marked on the chart. @type {Set<string>} */
  let takenEdges = new Set();
  /** @type {ReturnType<typeof streamTranscript> | null} */
  let stream = null;
  void api('GET', '/api/chart').then((r) => {
    if (!r.ok) return;
    chart = r.data;
    drawChart();
  });

  function drawChart() {
    if (chart === null) return;
    fill(chartBox, renderChart(chart, current === 'queued' ? 'idle' : current, takenEdges));
  }

  async function cancel() {
    cancelButton.disabled = true;
    const result = await api('POST', `/api/sessions/${enc}/cancel`, { reason: 'cancelled from the dashboard' });
    cancelNote.textContent = result.ok
      ? `cancel sent (${result.data.delivered})`
      : (result.data?.error ?? `cancel failed (HTTP ${result.status})`);
  }

  // Deletes the session everywhere (a running turn is cancelled first), after the operator confirms.
  async function remove() {
    if (
      !window.confirm(
        `Delete session ${sessionId}? Its messages and agent state are removed everywhere; a running turn is cancelled first.`,
      )
    )
      return;
    deleteButton.disabled = true;
    const result = await api('DELETE', `/api/sessions/${enc}?force=true`);
    if (result.ok) return navigate('/');
    deleteButton.disabled = false;
    cancelNote.textContent = result.data?.error ?? `delete failed (HTTP ${result.status})`;
  }

  /**
   * The agent's permission requests waiting for an operator, with Allow / Deny (write scope).
   * @param {Array<{ requestId: string, tool: string, kind?: string, arguments: unknown, options: Array<{ name: string }>, deadlineAt: number, decision?: { outcome: string, by: string } }>} approvals
   */
  function renderApprovals(approvals) {
    approvalsPanel.hidden = approvals.length === 0;
    fill(
      approvalsPanel,
      h('h2', {}, 'Awaiting approval'),
      ...approvals.map((a) => {
        const note = h('span', { class: 'muted' });
        /** @param {'allow' | 'deny'} decision */
        const decide = async (decision) => {
          const result = await api('POST', `/api/sessions/${enc}/approvals/${encodeURIComponent(a.requestId)}`, {
            decision,
          });
          note.textContent = result.ok
            ? `${result.data.outcome} by ${result.data.by}`
            : (result.data?.error ?? `failed (HTTP ${result.status})`);
        };
        const decided = a.decision
          ? h(
              'span',
              { class: 'muted' },
              `${a.decision.outcome} by ${a.decision.by}: given to the agent when it asks again`,
            )
          : null;
        return h(
          'div',
          { class: 'approval', 'data-testid': 'approval', 'data-request-id': a.requestId },
          h('b', {}, a.tool),
          a.kind ? h('span', { class: 'muted' }, ` (${a.kind})`) : null,
          ' ',
          h('code', {}, preview(a.arguments, 300)),
          h(
            'div',
            { class: 'muted' },
            `options: ${a.options.map((o) => o.name).join(', ')} · denied ${ms(Math.max(0, a.deadlineAt - Date.now()))} from now unless answered`,
          ),
          decided ??
            (can('write')
              ? h(
                  'div',
                  { class: 'actions' },
                  h(
                    'button',
                    { type: 'button', class: 'primary', 'data-testid': 'approve', onclick: () => decide('allow') },
                    'Allow once',
                  ),
                  h(
                    'button',
                    { type: 'button', class: 'danger', 'data-testid': 'deny', onclick: () => decide('deny') },
                    'Deny',
                  ),
                  note,
                )
              : null),
        );
      }),
    );
  }

  // Re-runs the failed last turn as a new turn (the API refuses, with its reason, when it cannot).
  async function retry() {
    retryButton.disabled = true;
    const result = await api('POST', `/api/sessions/${enc}/retry`);
    cancelNote.textContent = result.ok
      ? `retry queued as turn ${result.data.turn}`
      : (result.data?.error ?? `retry failed (HTTP ${result.status})`);
  }

  // A session parked at a quota wall starts its next attempt now, before the provider's reset.
  async function resume() {
    resumeButton.disabled = true;
    const result = await api('POST', `/api/sessions/${enc}/resume`);
    cancelNote.textContent = result.ok
      ? `resumed: turn ${result.data.turn} goes on now`
      : (result.data?.error ?? `resume failed (HTTP ${result.status})`);
  }

  /**
   * The waiting prompts, each with a remove button (write scope); read only when some wait.
   * @param {{ queuedPrompts: number }} view
   */
  async function renderQueue(view) {
    queuePanel.hidden = view.queuedPrompts === 0;
    if (view.queuedPrompts === 0) return fill(queueList);
    const result = await api('GET', `/api/sessions/${enc}/queue`);
    if (!result.ok) return;
    /** @type {Array<{ id: string, text: string }>} */
    const prompts = result.data.prompts;
    fill(
      queueList,
      ...prompts.map((p) =>
        h(
          'li',
          { 'data-prompt-id': p.id },
          h('span', {}, p.text.length > 120 ? `${p.text.slice(0, 119)}…` : p.text),
          ' ',
          can('write')
            ? h(
                'button',
                {
                  type: 'button',
                  class: 'secondary',
                  'data-testid': 'remove-prompt',
                  onclick: () => void unqueue(p.id),
                },
                'Remove',
              )
            : null,
        ),
      ),
    );
  }

  /** @param {string} promptId */
  async function unqueue(promptId) {
    const result = await api('DELETE', `/api/sessions/${enc}/queue/${encodeURIComponent(promptId)}`);
    cancelNote.textContent = result.ok
      ? 'queued prompt removed'
      : (result.data?.error ?? `remove failed (HTTP ${result.status})`);
  }

  async function refresh() {
    const result = await api('GET', `/api/sessions/${enc}`);
    // Deleted while shown: say so and stop streaming and polling.
    if (result.status === 404) {
      stopAll();
      return noSuchSession(main, sessionId);
    }
    if (!result.ok) {
      fill(
        facts,
        h(
          'span',
          { class: 'form-error' },
          result.status === 404 ? 'Unknown session.' : (result.data?.error ?? 'cannot load the session'),
        ),
      );
      return;
    }
    const view = result.data;
    if (view.state !== current) {
      current = view.state;
      drawChart();
    }
    fill(stateEl, badge(view.state));
    turnRuns = view.state !== 'queued' && view.state !== 'idle' && !SETTLED.has(view.state);
    relabelPrompt();
    const turn = view.turn;
    fill(
      facts,
      h('span', {}, 'state ', stateEl),
      h('span', {}, 'agent ', h('b', { 'data-testid': 'session-agent' }, view.agent)),
      h('span', {}, 'turn ', h('b', {}, turn ? `#${turn.index} ${turn.status}` : '–')),
      turn?.failureReason ? h('span', {}, 'failure ', h('b', {}, turn.failureReason)) : null,
      view.waitingFor
        ? h(
            'span',
            { 'data-testid': 'session-waiting-for' },
            // The fleet's own key ('*') holds only paused dispatch.
            view.waitingFor.limit === '*'
              ? ['waiting: ', h('b', {}, 'dispatch paused')]
              : ['waiting for fleet limit ', h('b', {}, view.waitingFor.limit), ` (${view.waitingFor.reason})`],
          )
        : null,
      view.parkedUntil
        ? h(
            'span',
            {
              'data-testid': 'session-parked-until',
              title: `parked since ${new Date(view.parkedUntil.since).toISOString()}`,
            },
            'parked at a quota wall until ',
            h('b', {}, new Date(view.parkedUntil.until).toLocaleString()),
            ` (in ${ms(Math.max(0, view.parkedUntil.until - Date.now()))}${view.parkedUntil.free ? ', attempt not counted' : ''})`,
          )
        : null,
      view.nextRetryAt && !view.parkedUntil
        ? h('span', {}, 'next attempt ', h('b', {}, `in ${ms(Math.max(0, view.nextRetryAt - Date.now()))}`))
        : null,
      view.queuedPrompts > 0 ? h('span', {}, 'queued prompts ', h('b', {}, String(view.queuedPrompts))) : null,
      view.heldBy ? h('span', {}, 'worker ', h('b', { class: 'mono' }, view.heldBy)) : null,
      h('span', {}, 'messages ', h('b', {}, String(view.lastSeq))),
      view.usage
        ? h('span', {}, 'tokens ', h('b', { 'data-testid': 'session-tokens' }, tokens(view.usage.total)))
        : null,
    );
    cancelButton.disabled =
      (SETTLED.has(view.state) && view.queuedPrompts === 0) || view.state === 'cancelling' || view.cancelRequested;
    resumeButton.hidden = view.state !== 'parked';
    resumeButton.disabled = view.state !== 'parked';
    retryButton.disabled = !(turn?.status === 'failed' && view.queuedPrompts === 0 && !view.cancelRequested);
    void renderQueue(view);
    renderApprovals(view.approvals ?? []);
    if (turn && (turn.status === 'cancelled' || turn.status === 'failed') && view.queuedPrompts === 0)
      stream?.closeTools(turn.status);
    renderTimeline(view);
    renderPath(view);
    renderPrompts(view);
    void checkWorkers(view);
    workspace.update(view);
    fill(
      historyBody,
      ...view.history
        .slice(-50)
        .reverse()
        .map((/** @type {{ at: number, from: string, to: string, event: string, label: string }} */ t) =>
          h(
            'tr',
            {},
            h('td', {}, clock(t.at)),
            h('td', {}, t.from),
            h('td', {}, t.to),
            // In words; the machine's own event name on hover.
            h('td', { title: t.event }, t.label),
          ),
        ),
    );
  }

  /**
   * Each turn's prompt, whole, oldest first: from the transitions that started the turns (a prompt over 64 KB is
   * kept cut there), and the latest turn's own text (whole) when it is not among them yet (queued).
   * @param {any} view
   */
  function renderPrompts(view) {
    /** @type {Map<number, { text: string, at: number | null, truncated: boolean }>} */
    const turns = new Map();
    for (const t of /** @type {Array<{ at: number, prompt?: { turn: number, text: string, truncated?: true } }>} */ (
      view.history
    ))
      if (t.prompt) turns.set(t.prompt.turn, { text: t.prompt.text, at: t.at, truncated: t.prompt.truncated === true });
    const turn = view.turn;
    if (turn && typeof turn.prompt === 'string') {
      const known = turns.get(turn.index);
      // The turn's own text is whole: it wins over a copy kept cut.
      turns.set(turn.index, { text: turn.prompt, at: known?.at ?? null, truncated: false });
    }
    const entries = [...turns.entries()].sort(([a], [b]) => a - b);
    const key = JSON.stringify(entries);
    if (promptsList.dataset.key === key) return;
    promptsList.dataset.key = key;
    if (entries.length === 0) return void fill(promptsList, h('li', { class: 'muted' }, 'No prompt yet.'));
    fill(
      promptsList,
      ...entries.map(([index, p]) =>
        h(
          'li',
          { 'data-testid': 'turn-prompt', 'data-turn': index },
          h(
            'div',
            { class: 'muted' },
            `turn #${index}`,
            p.at === null ? '' : ` · ${clock(p.at)}`,
            ` · ${p.text.length.toLocaleString()} characters`,
            p.truncated ? ' · kept cut at 64 KB' : '',
          ),
          h('pre', { class: 'prompt-text' }, p.text),
        ),
      ),
    );
  }

  let workerChecks = 0;
  /**
   * A session no worker has taken yet: says when no live worker can take it (none is live, or none offers its
   * agent), and stops saying so once one can. Asked again on every poll while the session waits.
   * @param {any} view
   */
  async function checkWorkers(view) {
    const asked = ++workerChecks;
    const waiting = view.state === 'queued' || view.turn?.status === 'queued';
    if (!waiting) return void (noWorker.hidden = true);
    const result = await api('GET', '/api/workers');
    // A later poll's answer is the one that counts.
    if (!result.ok || asked !== workerChecks) return;
    /** @type {Array<{ live: boolean, lastSeen: number, agents?: string[] }>} */
    const workers = result.data.workers;
    const live = workers.filter((w) => w.live);
    // A worker that does not say which agents it has (an older one) may have any (offersAgent() in worker-liveness.ts).
    const offering = live.filter((w) => w.agents === undefined || w.agents.includes(view.agent));
    if (offering.length > 0) return void (noWorker.hidden = true);
    noWorker.hidden = false;
    noWorker.dataset.reason = live.length === 0 ? 'no-worker' : 'no-agent';
    fill(
      noWorker,
      live.length === 0
        ? [
            h('b', {}, 'No live worker'),
            workers.length === 0
              ? ': no worker has ever sent a heartbeat. '
              : `: the last heartbeat was ${ago(Math.max(...workers.map((w) => w.lastSeen)))}. `,
            'This session waits queued until one runs (',
            h('code', {}, 'sessiond worker'),
            ').',
          ]
        : [
            h('b', {}, `No live worker offers the agent ${view.agent}`),
            `: the ${live.length} live worker${live.length === 1 ? ' offers' : 's offer'} ${[...new Set(live.flatMap((w) => w.agents ?? []))].join(', ')}. `,
            'This session waits queued until a worker with that agent runs.',
          ],
      h('span', { class: 'muted' }, ' Still watching: this goes away when a worker can take it.'),
    );
  }

  /**
   * The latest turn's path through the states, from the session's history: where it went, when,
   * and why (each transition's label), e.g. queued → running → backoff → running → completed.
   * @param {any} view
   */
  function renderPath(view) {
    const turn = view.turn;
    /** @type {Array<{ at: number, from: string, to: string, event: string, label: string, prompt?: { turn: number } }>} */
    const history = view.history;
    if (!turn) {
      pathTitle.textContent = '';
      return void fill(pathList, h('li', { class: 'muted' }, 'No turn yet.'));
    }
    pathTitle.textContent = `(turn #${turn.index})`;
    const steps = turnPath(history, turn.index, turn.status, view.createdAt);
    const key = JSON.stringify([steps, view.state]);
    if (pathList.dataset.key === key) return;
    pathList.dataset.key = key;
    takenEdges = new Set(steps.flatMap((step) => (step.from === null ? [] : [`${step.from}>${step.state}`])));
    drawChart();
    fill(
      pathList,
      ...steps.map((step, i) => {
        const next = steps[i + 1];
        const last = next === undefined;
        // How long it stayed: until the next step, or until now in the state it is in (none once settled).
        const until = next ? next.at : SETTLED.has(step.state) ? null : Date.now();
        const stay = step.at === null || until === null ? null : until - step.at;
        return h(
          'li',
          {
            class: `step${last ? ' current' : ''}`,
            'data-testid': 'path-step',
            'data-state': step.state,
            title: step.event ?? '',
          },
          i > 0 ? h('span', { class: 'via', 'data-testid': 'path-label' }, step.label) : null,
          badge(step.state),
          h(
            'span',
            { class: 'when' },
            step.at === null ? '' : clock(step.at),
            stay === null ? '' : ` · ${last ? 'for ' : ''}${ms(stay)}`,
          ),
        );
      }),
    );
  }

  /** @param {any} view */
  function renderTimeline(view) {
    const turn = view.turn;
    if (!turn) {
      timelineTitle.textContent = '';
      fill(timeline, h('li', { class: 'muted' }, 'No turn yet.'));
      return;
    }
    timelineTitle.textContent = `(turn #${turn.index}, ${turn.status})`;
    const items = [];
    for (const a of turn.attempts) {
      const outcome = a.outcome ?? 'running';
      const took = a.endedAt ? ms(a.endedAt - a.startedAt) : `running for ${ms(Date.now() - a.startedAt)}`;
      items.push(
        h(
          'li',
          {
            class: `attempt outcome-${outcome}`,
            'data-testid': 'attempt',
            'data-attempt': a.attempt,
            'data-outcome': outcome,
            'data-category': a.category ?? '',
          },
          h(
            'div',
            {},
            h('span', { class: 'what' }, `Attempt ${a.attempt}`),
            ` · ${outcome}`,
            a.category ? [' · ', h('span', { class: 'category' }, a.category)] : null,
            ` · ${took}`,
            a.usage ? h('span', { 'data-testid': 'attempt-tokens' }, ` · ${tokens(a.usage)} tokens`) : null,
            h('span', { class: 'muted' }, ` · started ${clock(a.startedAt)}`),
          ),
          a.errorText ? h('div', { class: 'err' }, preview(a.errorText, 300)) : null,
        ),
      );
      if (a.delayMs !== undefined && a.delayMs !== null) {
        items.push(
          h(
            'li',
            { class: 'backoff', 'data-testid': 'backoff', 'data-delay-ms': a.delayMs },
            `backoff ${ms(a.delayMs)} before attempt ${a.attempt + 1}`,
          ),
        );
      }
    }
    if (turn.status === 'cancelled')
      items.push(h('li', { class: 'muted' }, `cancelled${turn.cancelReason ? `: ${turn.cancelReason}` : ''}`));
    if (turn.status === 'failed') items.push(h('li', { class: 'muted' }, `turn failed: ${turn.failureReason ?? ''}`));
    if (turn.status === 'completed') items.push(h('li', { class: 'muted' }, 'turn completed'));
    fill(timeline, ...items);
  }

  /** `12 in / 3 out` (the kinds that were reported). @param {Record<string, number>} u */
  function tokens(u) {
    const parts = [];
    if (u.input !== undefined) parts.push(`${u.input} in`);
    if (u.output !== undefined) parts.push(`${u.output} out`);
    if (u.cacheRead) parts.push(`${u.cacheRead} cache read`);
    if (u.cacheWrite) parts.push(`${u.cacheWrite} cache write`);
    return parts.length === 0 ? 'none' : parts.join(' / ');
  }

  const live = streamTranscript(sessionId, transcript, liveDot);
  stream = live;
  /** @type {() => void} */
  let stopPoll = () => {};
  const stopAll = () => {
    live.stop();
    stopPoll();
  };
  stopPoll = poll(refresh, 1000);
  return stopAll;
}

/**
 * The states the turn `index` went through: `queued` (with the session's creation time for its first
 * turn: later turns' queueing time is not recorded), then each transition's target from the one that
 * started the turn (the transition carrying its prompt; else the last one out of a quiescent state).
 * @param {Array<{ at: number, from: string, to: string, event: string, label: string, prompt?: { turn: number } }>} history
 * @param {number} index
 * @param {string} status
 * @param {number} createdAt
 * @returns {Array<{ state: string, from: string | null, at: number | null, label: string, event: string | null }>}
 */
export function turnPath(history, index, status, createdAt) {
  /** @type {{ state: string, from: string | null, at: number | null, label: string, event: string | null }} */
  const queued = { state: 'queued', from: null, at: index === 1 ? createdAt : null, label: '', event: null };
  if (status === 'queued') return [queued];
  let start = history.findLastIndex((t) => t.prompt?.turn === index);
  if (start === -1) start = history.findLastIndex((t) => QUIESCENT.has(t.from) && !QUIESCENT.has(t.to));
  if (start === -1) return [queued];
  return [
    queued,
    ...history.slice(start).map((t) => ({ state: t.to, from: t.from, at: t.at, label: t.label, event: t.event })),
  ];
}

/** Nothing runs in these: a turn starts by leaving one. */
const QUIESCENT = new Set(['none', 'idle', 'completed', 'failed', 'cancelled']);
