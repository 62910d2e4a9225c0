// @ts-check
import { api, can } from './api.js';
import { fill, h } from './dom.js';
import { navigate } from './nav.js';
import { SETTLED } from './vocabulary.js';

/**
 * A workspace session's turns (docs/workspaces.md "Undo, fork and diff"): each turn's diff, Undo of the
 * last one and Fork at the one shown (write scope). Hidden for a session without a workspace (the API says
 * so with a 409 the first time the panel asks for a diff).
 * @param {string} sessionId
 * @returns {{ panel: HTMLElement, update: (view: any) => void }}
 */
export function workspacePanel(sessionId) {
  const enc = encodeURIComponent(sessionId);
  const turnSelect = /** @type {HTMLSelectElement} */ (h('select', { 'data-testid': 'diff-turn', name: 'turn' }));
  const statBox = /** @type {HTMLInputElement} */ (h('input', { type: 'checkbox', 'data-testid': 'diff-stat' }));
  const diffOut = h('pre', { class: 'diff', 'data-testid': 'diff' });
  const note = h('span', { class: 'muted', 'data-testid': 'workspace-note' });
  const forkAs = /** @type {HTMLInputElement} */ (
    h('input', { name: 'as', placeholder: 'new session id', 'data-testid': 'fork-as' })
  );
  const undoButton = h(
    'button',
    { type: 'button', class: 'danger', 'data-testid': 'undo', onclick: () => void undo() },
    'Undo last turn',
  );
  const forkButton = h(
    'button',
    { type: 'button', class: 'secondary', 'data-testid': 'fork', onclick: () => void fork() },
    'Fork at this turn',
  );
  const panel = h(
    'section',
    { class: 'panel', 'data-testid': 'workspace', hidden: true },
    h('h2', {}, 'Workspace'),
    h(
      'div',
      { class: 'actions' },
      h('label', {}, 'turn ', turnSelect),
      h('label', {}, statBox, ' summary'),
      can('write') ? undoButton : null,
      can('write') ? [forkAs, forkButton] : null,
    ),
    note,
    diffOut,
  );
  turnSelect.addEventListener('change', () => void showDiff());
  statBox.addEventListener('change', () => void showDiff());

  /** The session has no workspace: the panel stays hidden. */
  let none = false;
  /** The newest turn listed, and whether the session was settled at the last update. */
  let listed = 0;
  let settled = false;

  async function showDiff() {
    const turn = turnSelect.value;
    if (turn === '') return;
    const result = await api('GET', `/api/sessions/${enc}/diff?turn=${turn}${statBox.checked ? '&stat=1' : ''}`);
    if (!result.ok && result.status === 409 && /has no workspace/.test(result.data?.error ?? '')) {
      none = true;
      panel.hidden = true;
      return;
    }
    panel.hidden = false;
    if (!result.ok) {
      note.textContent = result.data?.error ?? `diff failed (HTTP ${result.status})`;
      fill(diffOut);
      return;
    }
    note.textContent = `turn ${result.data.turn}, from ${result.data.from === 0 ? 'the session start' : `turn ${result.data.from}`}`;
    diffOut.textContent = result.data.diff === '' ? '(no change to the files)' : result.data.diff;
  }

  async function undo() {
    const result = await api('POST', `/api/sessions/${enc}/undo`, {});
    note.textContent = result.ok
      ? `turn ${result.data.undone} undone: the files and conversation are turn ${result.data.to}'s`
      : (result.data?.error ?? `undo failed (HTTP ${result.status})`);
    if (result.ok) {
      turnSelect.value = String(result.data.to);
      await showDiff();
    }
  }

  async function fork() {
    const result = await api('POST', `/api/sessions/${enc}/fork`, {
      as: forkAs.value.trim(),
      ...(turnSelect.value === '' ? {} : { turn: Number(turnSelect.value) }),
    });
    if (result.ok) return navigate(`/sessions/${encodeURIComponent(result.data.sessionId)}`);
    note.textContent =
      result.data?.issues
        ?.map((/** @type {{ field: string, message: string }} */ i) => `${i.field}: ${i.message}`)
        .join('; ') ??
      result.data?.error ??
      `fork failed (HTTP ${result.status})`;
  }

  return {
    panel,
    update(view) {
      if (none) return;
      const last = view.turn?.index ?? 0;
      const nowSettled = SETTLED.has(view.state) && view.queuedPrompts === 0 && !view.heldBy;
      if (last !== listed) {
        const chosen = turnSelect.value;
        fill(
          turnSelect,
          ...Array.from({ length: last }, (_, i) => last - i).map((n) => h('option', { value: String(n) }, `#${n}`)),
        );
        if (chosen !== '' && Number(chosen) <= last && listed === last) turnSelect.value = chosen;
        listed = last;
      }
      // A diff is refused while a worker holds the session: asked for once the turn has ended.
      if (nowSettled && !settled && last > 0) void showDiff();
      settled = nowSettled;
      undoButton.disabled = !nowSettled;
    },
  };
}
