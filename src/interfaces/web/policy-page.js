// @ts-check
// The policies: the deployment policy (what callers may choose: read from GET /api/deployment-policy; the
// operator sets it in the configuration, the API does not change it) and the global retry policy (the
// editor of policy-editor.js: admin edits it, the API's errors shown at their fields).

import { api } from './api.js';
import { fill, h, ms } from './dom.js';
import { policyEditor } from './policy-editor.js';

/**
 * @param {HTMLElement} main
 * @returns {() => void}
 */
export function policyPage(main) {
  const deployment = h(
    'section',
    { class: 'panel', 'data-testid': 'deployment-policy' },
    h('p', { class: 'muted' }, 'Loading the deployment policy…'),
  );
  const retry = policyEditor({
    path: '/api/retry-policy',
    title: 'Global retry policy',
    allowReset: 'Reset to defaults',
  });
  fill(main, h('div', { class: 'grid' }, h('div', {}, deployment), h('div', {}, retry.panel)));
  let stopped = false;
  void api('GET', '/api/deployment-policy').then((result) => {
    if (stopped) return;
    if (!result.ok)
      return void fill(
        deployment,
        h('h2', {}, 'Deployment policy'),
        h('p', { class: 'form-error' }, result.data?.error ?? `cannot read the policy (HTTP ${result.status})`),
      );
    fill(deployment, ...deploymentPolicy(result.data));
  });
  return () => {
    stopped = true;
  };
}

/** @param {unknown} value */
const list = (value) =>
  Array.isArray(value) && value.length > 0
    ? value.map((v, i) => [i > 0 ? ', ' : '', h('code', {}, String(v))])
    : h('span', { class: 'muted' }, 'none');

/**
 * The policy as rows of what it allows, then each agent's permissions.
 * @param {any} p the deployment policy (src/policy/schema.ts DeploymentPolicy)
 */
function deploymentPolicy(p) {
  /** @type {Array<[string, string, any]>} */
  const rows = [
    ['agents', 'the agents callers may choose', list(p.agents)],
    ['workspace', 'where a session runs when its caller names no directory', h('code', {}, p.workspace)],
    ['workspaceRoots', 'a directory a caller names must lie in one of these', list(p.workspaceRoots)],
    [
      'workspaces',
      'workspaces: the repositories callers may start one from; whether callers may name a directory',
      p.workspaces
        ? [list(p.workspaces.repos), ` · caller directory ${p.workspaces.callerCwd ? 'allowed' : 'refused'}`]
        : h('span', { class: 'muted' }, 'none; caller directory allowed'),
    ],
    ['agentDirRoots', "where callers may point pi's agentDir", list(p.agentDirRoots)],
    ['maxIdleTimeoutMs', 'the longest idle timeout a caller may ask for', ms(p.maxIdleTimeoutMs)],
    ['maxPromptChars', 'the longest prompt', `${Number(p.maxPromptChars).toLocaleString()} characters`],
    ['maxTurnMs', "the longest turn (caps every retry policy's)", p.maxTurnMs === null ? 'no limit' : ms(p.maxTurnMs)],
    ['maxParkMs', 'the longest park at a quota wall', p.maxParkMs === null ? 'no limit' : ms(p.maxParkMs)],
    [
      'rateLimitAttempts',
      'whether an attempt ended by a quota wall counts against maxAttempts',
      p.rateLimitAttempts === 'counted' ? 'always counted' : 'as each retry policy says',
    ],
    [
      'sandbox',
      'whether attempts need a sandbox',
      p.sandbox?.required ? 'required: an attempt on a worker without one fails' : 'not required',
    ],
    [
      'approvals',
      'tool approvals: the deadline, and the rules that allow without asking',
      [
        `denied after ${ms(p.approvals?.deadlineMs)} unanswered · `,
        (p.approvals?.autoAllow ?? []).length === 0
          ? h('span', { class: 'muted' }, 'no auto-allow rule')
          : list(
              p.approvals.autoAllow.map((/** @type {Record<string, string>} */ r) =>
                Object.entries(r)
                  .map(([k, v]) => `${k}=${v}`)
                  .join(' '),
              ),
            ),
      ],
    ],
  ];
  const agents = Object.entries(p.permissions ?? {});
  return [
    h('h2', {}, 'Deployment policy'),
    h(
      'p',
      { class: 'muted' },
      'What callers of this deployment may choose. The operator sets it in the configuration (',
      h('code', {}, 'policy'),
      ' in the config file, or ',
      h('code', {}, 'SESSIOND_POLICY'),
      '); the API shows it and does not change it. ',
      h('code', {}, 'sessiond policy show'),
      ' prints the same.',
    ),
    h(
      'table',
      { class: 'policy' },
      h(
        'tbody',
        {},
        rows.map(([name, what, value]) =>
          h(
            'tr',
            { 'data-field': name },
            h('th', { title: what }, name),
            h('td', { class: 'value', 'data-testid': `policy-${name}` }, value),
            h('td', { class: 'muted' }, what),
          ),
        ),
      ),
    ),
    h('h3', {}, 'Per agent'),
    h(
      'table',
      { class: 'policy', 'data-testid': 'policy-per-agent' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ['agent', 'permission ceiling', 'lists', 'switches on', 'network'].map((t) => h('th', {}, t)),
        ),
      ),
      h(
        'tbody',
        {},
        agents.map(([name, a]) =>
          h(
            'tr',
            { 'data-agent': name },
            h('td', {}, h('b', {}, name)),
            h(
              'td',
              {},
              a.ladder
                ? [
                    h('code', {}, a.ladder.ceiling),
                    h('span', { class: 'muted' }, ` of ${a.ladder.steps.join(' < ')} (${a.ladder.option})`),
                  ]
                : h('span', { class: 'muted' }, '–'),
            ),
            h(
              'td',
              { class: 'wrap' },
              a.lists.length === 0
                ? h('span', { class: 'muted' }, '–')
                : a.lists.map(
                    (/** @type {{ option: string, allowed: string[] | '*' }} */ l, /** @type {number} */ i) => [
                      i > 0 ? h('br') : null,
                      h('code', {}, l.option),
                      ': ',
                      l.allowed === '*' ? 'any' : l.allowed.length === 0 ? 'none' : l.allowed.join(', '),
                    ],
                  ),
            ),
            h(
              'td',
              { class: 'wrap' },
              list(
                a.switches
                  .filter((/** @type {{ enabled: boolean }} */ w) => w.enabled)
                  .map((/** @type {{ option: string }} */ w) => w.option),
              ),
            ),
            h(
              'td',
              { class: 'wrap' },
              list(
                (p.network?.[name] ?? []).map((/** @type {{ host: string, port: number | null }} */ a) =>
                  a.port === null ? a.host : `${a.host.includes(':') ? `[${a.host}]` : a.host}:${a.port}`,
                ),
              ),
            ),
          ),
        ),
      ),
    ),
  ];
}
