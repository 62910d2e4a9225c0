// @ts-check
// The live transcript of a session: its stored messages, streamed.

import { api, principal } from './api.js';
import { h, preview } from './dom.js';
import { MESSAGE_TYPES } from './vocabulary.js';

/**
 * The live transcript: SSE from /api/sessions/:id/events. With a login, the stream is opened with a
 * short-lived stream ticket (EventSource sends no headers); EventSource resumes with Last-Event-ID
 * while the ticket holds; once the server refuses it (expired), a new ticket resumes after lastSeq.
 */
/**
 * @param {string} sessionId
 * @param {HTMLElement} box
 * @param {HTMLElement} liveDot
 * @returns {{ stop: () => void, closeTools: (why: string) => void }}
 */
export function streamTranscript(sessionId, box, liveDot) {
  let lastSeq = 0;
  /** @type {number | null} */
  let turn = null;
  /** @type {number | null} */
  let attempt = null;
  /** @type {HTMLElement | null} */
  let assistantEl = null;
  let stopped = false;
  /** @type {EventSource | null} */
  let source = null;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let retryTimer;
  /** @type {Map<string, { el: HTMLElement, status: HTMLElement, args: HTMLElement, open: boolean }>} */
  const tools = new Map();
  const enc = encodeURIComponent(sessionId);

  async function open() {
    if (stopped) return;
    let url = `/api/sessions/${enc}/events?from=${lastSeq + 1}`;
    const me = principal();
    if (me !== null && me.via !== 'open') {
      const ticket = await api('POST', `/api/sessions/${enc}/stream-ticket`);
      if (!ticket.ok) {
        if (ticket.status !== 401) retryTimer = setTimeout(open, 2000);
        return;
      }
      url = `${ticket.data.url}&from=${lastSeq + 1}`;
    }
    if (stopped) return;
    const opened = new EventSource(url);
    source = opened;
    box.dataset.streams = String(Number(box.dataset.streams ?? 0) + 1);
    opened.addEventListener('open', () => liveDot.classList.add('on'));
    opened.addEventListener('error', () => {
      liveDot.classList.remove('on');
      // CONNECTING: EventSource reconnects by itself (Last-Event-ID). CLOSED: refused (the ticket expired): a new one.
      if (opened.readyState === EventSource.CLOSED && !stopped) {
        opened.close();
        retryTimer = setTimeout(open, 200);
      }
    });
    for (const type of MESSAGE_TYPES) opened.addEventListener(type, onMessage);
    opened.addEventListener('message', onMessage);
  }

  /** @template {HTMLElement} E @param {E} el @returns {E} */
  const add = (el) => {
    const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
    box.append(el);
    if (atBottom) box.scrollTop = box.scrollHeight;
    return el;
  };

  /** @param {MessageEvent} event */
  const onMessage = (event) => {
    /** @type {any} */
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
      add(
        h(
          'div',
          { class: 'attempt', 'data-testid': 'transcript-attempt' },
          `attempt ${m.attempt}${m.attempt > 1 ? ' (retry)' : ''}`,
        ),
      );
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
        add(
          h(
            'div',
            { class: 'thought', 'data-testid': 'approval-requested' },
            `${c.tool ?? 'tool'} asks permission${c.reasked ? ' (asked again)' : ''}`,
          ),
        );
        assistantEl = null;
        break;
      case 'approval.decided':
        add(
          h(
            'div',
            { class: 'thought', 'data-testid': 'approval-decided' },
            `${c.outcome} by ${c.by}${c.reason ? `: ${c.reason}` : ''}`,
          ),
        );
        assistantEl = null;
        break;
      case 'tool.call': {
        const status = h('span', { class: 'status' }, 'running');
        const args = h('code', {}, preview(c.arguments, 200));
        const el = add(
          h(
            'div',
            { class: 'tool running', 'data-testid': 'tool', 'data-tool': c.name ?? '' },
            status,
            ' ',
            h('b', {}, c.name ?? 'tool'),
            ' ',
            args,
          ),
        );
        tools.set(c.toolCallId, { el, status, args, open: true });
        assistantEl = null;
        break;
      }
      case 'tool.completed':
      case 'tool.failed': {
        const tool = tools.get(c.toolCallId);
        const ok = m.type === 'tool.completed';
        const el =
          tool?.el ??
          add(h('div', { class: 'tool' }, h('span', { class: 'status' }), ' ', h('b', {}, c.name ?? 'tool')));
        el.classList.remove('running');
        el.classList.add(ok ? 'completed' : 'failed');
        const statusEl = el.querySelector('.status');
        if (statusEl) statusEl.textContent = ok ? 'done' : 'failed';
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
        add(
          h(
            'div',
            { class: 'meta' },
            `${m.type === 'session.started' ? 'agent session started' : 'agent session resumed'}${c.sessionId ? ` (${c.sessionId})` : ''}`,
          ),
        );
        break;
      case 'agent.retry':
        add(
          h(
            'div',
            { class: 'meta' },
            `the agent retried on its own (${c.phase ?? ''}${c.errorText ? `: ${c.errorText}` : ''})`,
          ),
        );
        break;
      case 'terminal.completed':
        closeTools('ended');
        add(
          h(
            'div',
            { class: 'end-ok', 'data-testid': 'terminal' },
            `attempt ${m.attempt} completed (${c.stopReason ?? 'stop'})`,
          ),
        );
        assistantEl = null;
        break;
      case 'terminal.cancelled':
        closeTools('ended');
        add(
          h(
            'div',
            { class: 'end-cancelled', 'data-testid': 'terminal' },
            `attempt ${m.attempt} cancelled · ${preview(c.reason ?? 'cancelled', 300)}`,
          ),
        );
        assistantEl = null;
        break;
      case 'terminal.failed':
        closeTools('ended');
        add(
          h(
            'div',
            { class: 'end-bad', 'data-testid': 'terminal' },
            `attempt ${m.attempt} failed · `,
            h('span', { class: 'category' }, c.category ?? 'unknown'),
            ` ${preview(c.text ?? '', 300)}`,
          ),
        );
        assistantEl = null;
        break;
      case 'workspace.undone':
        add(
          h(
            'div',
            { class: 'meta', 'data-testid': 'undone' },
            `turn ${c.turn} ${c.rollback === true ? 'rolled back' : 'undone'}: the files and conversation are turn ${c.to}'s again`,
          ),
        );
        break;
      case 'workspace.not_undone':
        add(h('div', { class: 'meta', 'data-testid': 'undone' }, `turn ${c.turn} not taken back: ${c.reason}`));
        break;
      default:
        add(h('div', { class: 'meta' }, `${m.type}: ${preview(c, 200)}`));
    }
  };
  /** Tool calls still open when their attempt ended (no terminal message after a cancel): marked with `why`. */
  /** @param {string} why */
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
