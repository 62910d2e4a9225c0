// @ts-check
/* The sessiond dashboard: plain DOM, no framework, no build step (native ES modules, checked by
   tsc through JSDoc: tsconfig.web.json). Everything it shows comes from the HTTP API (/api/…);
   it holds no business logic. This module is the shell: who is logged in, routing. */

import { api, can, principal, setPrincipal, whenLoggedOut } from './api.js';
import { fill, h } from './dom.js';
import { link, setRouter } from './nav.js';
import { homePage } from './home-page.js';
import { limitsPage } from './limits-page.js';
import { schedulesPage } from './schedules-page.js';
import { loginPage } from './login-page.js';
import { policyPage } from './policy-page.js';
import { sessionPage } from './session-page.js';
import { webhooksPage } from './webhooks-page.js';

/** @type {() => void} */
let stopPage = () => {};

function route() {
  stopPage();
  stopPage = () => {};
  const main = document.getElementById('main');
  if (main === null) return;
  renderWho();
  if (principal() === null) return loginPage(main);
  markNav();
  const match = /^\/sessions\/([^/]+)\/?$/.exec(location.pathname);
  const id = match?.[1];
  const page = PAGES[location.pathname.replace(/\/$/, '')];
  if (id !== undefined) {
    stopPage = sessionPage(main, decodeURIComponent(id));
    document.title = `${decodeURIComponent(id)} · sessiond`;
  } else if (page !== undefined) {
    stopPage = page.render(main);
    document.title = `${page.title} · sessiond`;
  } else {
    stopPage = homePage(main);
    document.title = 'sessiond';
  }
}

/** The pages besides the home page and a session's, by path. @type {Record<string, { title: string, render: (main: HTMLElement) => () => void }>} */
const PAGES = {
  '/policy': { title: 'Policies', render: policyPage },
  '/limits': { title: 'Fleet limits', render: limitsPage },
  '/webhooks': { title: 'Webhooks', render: webhooksPage },
  '/schedules': { title: 'Schedules', render: schedulesPage },
};

/** The header's link of the page shown is marked current; its links navigate in the page. */
function markNav() {
  for (const a of document.querySelectorAll('header nav a[data-page]')) {
    const here = a.getAttribute('href') === (location.pathname.replace(/\/$/, '') || '/');
    if (here) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

/** The header's "who am I" and logout. */
function renderWho() {
  const me = principal();
  const queue = document.querySelector('[data-testid="queue-link"]');
  if (queue) queue.setAttribute('href', me !== null && me.via !== 'open' && can('admin') ? '/queues-admin' : '/queues');
  const box = document.getElementById('who');
  if (!box) return;
  if (me === null || me.via === 'open') return void fill(box);
  fill(
    box,
    h('span', { 'data-testid': 'who' }, `${me.name} · ${me.scope}`),
    ' ',
    h('button', { type: 'button', class: 'secondary', 'data-testid': 'logout', onclick: logout }, 'Log out'),
  );
}

async function logout() {
  await api('POST', '/api/logout');
  setPrincipal(null);
  route();
}

async function start() {
  const who = await api('GET', '/api/whoami');
  setPrincipal(who.ok ? who.data : null);
  route();
}

setRouter(route);
for (const a of document.querySelectorAll('header nav a[data-page]'))
  a.addEventListener('click', (e) => link(/** @type {MouseEvent} */ (e)));
whenLoggedOut(route);
window.addEventListener('popstate', route);
void start();
