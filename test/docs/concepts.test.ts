import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { exportChart } from '../../machines/definition.ts';
import { sessionMachine } from '../../machines/session.machine.ts';
import { MACHINE_STATES } from '../../machines/states.ts';

/** docs/concepts.md: its statechart is the session machine's own, and every state is in the glossary. */

const doc = readFileSync(new URL('../../docs/concepts.md', import.meta.url), 'utf8');

/** The machine's transitions between distinct states as Mermaid lines, the events of one pair joined (root-level and self transitions left out). */
function mermaidOf(): string {
  const chart = exportChart(sessionMachine);
  const lines = [`[*] --> ${chart.initial ?? ''}`];
  for (const state of chart.states) {
    const events = new Map<string, string[]>();
    for (const t of state.transitions) {
      if (t.target === null || t.target === state.name) continue;
      const list = events.get(t.target) ?? [];
      if (!list.includes(t.event)) list.push(t.event);
      events.set(t.target, list);
    }
    for (const [target, list] of events) lines.push(`${state.name} --> ${target}: ${list.join(' / ')}`);
  }
  return ['```mermaid', 'stateDiagram-v2', ...lines.map((l) => `  ${l}`), '```'].join('\n');
}

describe('docs/concepts.md', () => {
  it("draws the session machine's statechart as the machine defines it", () => {
    const block = /```mermaid\n[\s\S]*?\n```/.exec(doc)?.[0];
    expect(block).toBe(mermaidOf());
  });

  it('names every state of the session machine in the lifecycle table', () => {
    for (const state of ['queued', ...MACHINE_STATES]) expect(doc).toContain(`| \`${state}\` |`);
  });
});
