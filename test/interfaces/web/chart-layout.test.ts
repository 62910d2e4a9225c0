import { describe, expect, it } from 'vitest';
import { exportChart } from '../../../machines/definition.ts';
import { sessionMachine } from '../../../machines/session.machine.ts';
import { RESTORE_ONLY_STATES } from '../../../machines/states.ts';
import {
  BOX_H,
  BOX_W,
  chartDepths,
  chartEdges,
  labelBox,
  layoutChart,
  overlaps,
  type Chart,
} from '../../../src/interfaces/web/chart-layout.js';

const chart = exportChart(sessionMachine) as Chart;

/** A small chart: a → b → c, c back to a, a loop on b, and r reached only on restore (r → b). */
const small: Chart = {
  id: 'small',
  initial: 'a',
  states: [
    { name: 'a', invokes: [], transitions: [{ event: 'go', target: 'b', guard: null }] },
    {
      name: 'b',
      invokes: ['work'],
      transitions: [
        { event: 'done', target: 'c', guard: 'ok' },
        { event: 'tick', target: 'b', guard: null },
        { event: 'done', target: 'c', guard: 'ok' },
      ],
    },
    {
      name: 'c',
      invokes: [],
      transitions: [
        { event: 'again', target: 'a', guard: null },
        { event: 'noop', target: null, guard: null },
      ],
    },
    { name: 'r', invokes: [], transitions: [{ event: 'restored', target: 'b', guard: null }] },
  ],
};

describe('chart layout', () => {
  it('merges transitions into one edge per pair, labelled event [guard], without repeats or targetless ones', () => {
    expect(chartEdges(small)).toEqual([
      { from: 'a', to: 'b', labels: ['go'] },
      { from: 'b', to: 'c', labels: ['done [ok]'] },
      { from: 'b', to: 'b', labels: ['tick'] },
      { from: 'c', to: 'a', labels: ['again'] },
      { from: 'r', to: 'b', labels: ['restored'] },
    ]);
  });

  it('puts states in columns by distance from the initial state; one reached only on restore one column before its target', () => {
    const { depth, reachable } = chartDepths(small, chartEdges(small));
    expect(Object.fromEntries(depth)).toEqual({ a: 0, b: 1, c: 2, r: 0 });
    expect([...reachable].sort()).toEqual(['a', 'b', 'c']);
  });

  it('routes backward edges over the top in lanes, loops on the box, and forward edges as curves', () => {
    const layout = layoutChart(small);
    expect(layout.lanes.map((l) => ({ to: l.to, sources: l.sources.map((s) => s.from), label: l.label.text }))).toEqual(
      [{ to: 'a', sources: ['c'], label: 'again' }],
    );
    expect(layout.loops.map((e) => [e.from, e.label.text])).toEqual([['b', 'tick']]);
    // Forward edges from reachable states first, then the restore-only ones.
    expect(layout.forward.map((e) => [e.from, e.to, e.reachable])).toEqual([
      ['a', 'b', true],
      ['b', 'c', true],
      ['r', 'b', false],
    ]);
    expect(layout.states.find((s) => s.name === 'r')?.reachable).toBe(false);
    expect(layout.states.find((s) => s.name === 'a')?.initial).toBe(true);
  });

  it('draws the session machine with every state inside the drawing and no two boxes overlapping', () => {
    const layout = layoutChart(chart);
    expect(layout.states.map((s) => s.name).sort()).toEqual(chart.states.map((s) => s.name).sort());
    const boxes = layout.states.map((s) => ({ x1: s.x, y1: s.y, x2: s.x + BOX_W, y2: s.y + BOX_H }));
    for (const [i, a] of boxes.entries()) {
      expect(a.x1).toBeGreaterThanOrEqual(0);
      expect(a.y1).toBeGreaterThanOrEqual(0);
      expect(a.x2).toBeLessThanOrEqual(layout.width);
      expect(a.y2).toBeLessThanOrEqual(layout.height);
      for (const b of boxes.slice(i + 1)) expect(overlaps(a, b)).toBe(false);
    }
  });

  it('marks the states only a restore reaches as such, and every other as reachable', () => {
    const layout = layoutChart(chart);
    const restoreOnly = layout.states.filter((s) => !s.reachable).map((s) => s.name);
    expect(restoreOnly.sort()).toEqual([...RESTORE_ONLY_STATES].sort());
  });

  it('places the session machine’s labels on no state box and on no other label', () => {
    const layout = layoutChart(chart);
    const stateBoxes = layout.states.map((s) => ({
      x1: s.x - 2,
      y1: s.y - 2,
      x2: s.x + BOX_W + 2,
      y2: s.y + BOX_H + 2,
    }));
    const labels = [...layout.lanes, ...layout.loops, ...layout.forward].map((e) =>
      labelBox(e.label.text, e.label.x, e.label.y, e.label.anchor),
    );
    expect(labels.length).toBeGreaterThan(5);
    for (const [i, label] of labels.entries()) {
      for (const box of stateBoxes) expect(overlaps(label, box)).toBe(false);
      for (const other of labels.slice(i + 1)) expect(overlaps(label, other)).toBe(false);
    }
  });
});
