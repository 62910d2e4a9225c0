// @ts-check
import { api, setPrincipal, showIssues } from './api.js';
import { field, fill, h } from './dom.js';
import { route } from './nav.js';

/**
 * The login form: a token exchanged once for a login cookie.
 * @param {HTMLElement} main
 */
export function loginPage(main) {
  const input = h('input', { type: 'password', name: 'token', autocomplete: 'off', 'data-testid': 'login-token' });
  const form = h(
    'form',
    { class: 'stack', 'data-testid': 'login-form', novalidate: true },
    field('API token', 'token', input, 'exchanged once for a login cookie; the page never keeps it'),
    h(
      'div',
      { class: 'actions' },
      h('button', { type: 'submit', class: 'primary', 'data-testid': 'login' }, 'Log in'),
      h('span', { class: 'form-error' }),
    ),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const result = await api('POST', '/api/login', { token: input.value.trim() });
    input.value = '';
    if (!result.ok) return showIssues(form, result);
    setPrincipal(result.data);
    route();
  });
  fill(
    main,
    h(
      'section',
      { class: 'panel login' },
      h('h1', {}, 'Log in'),
      h('p', { class: 'muted' }, 'This sessiond needs a token to read or change anything.'),
      form,
    ),
  );
}
