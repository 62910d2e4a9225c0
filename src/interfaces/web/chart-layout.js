// @ts-check
// The statechart's layout, pure: no DOM. States as boxes in columns by distance from the
// initial state, forward transitions as curves with their event [guard], backward ones routed
// over the top (one lane per target and event). States reached only on restore (no path from
// the initial state) are marked `reachable: false` (drawn dashed).

/**
 * @typedef {{ event: string, target: string | null, guard: string | null }} ChartTransition
 * @typedef {{ name: string, invokes: string[], transitions: ChartTransition[] }} ChartState
 * @typedef {{ id: string, initial: string | null, states: ChartState[] }} Chart
 * @typedef {{ x: number, y: number }} Point
 * @typedef {{ x1: number, y1: number, x2: number, y2: number }} Box
 * @typedef {'start' | 'middle' | 'end'} Anchor
 * @typedef {{ text: string, x: number, y: number, anchor: Anchor, full?: string }} Label (`full`: the whole text of a label shortened to fit)
 * @typedef {{ name: string, x: number, y: number, reachable: boolean, initial: boolean, invokes: string[] }} StateBox
 * @typedef {{ from: string, to: string, d: string, reachable: boolean, label: Label }} EdgeLayout
 * @typedef {{ from: string, d: string, reachable: boolean }} LaneSource
 * @typedef {{ to: string, sources: LaneSource[], d: string, label: Label }} LaneLayout
 * @typedef {{ width: number, height: number, viewBox: { x: number, y: number, width: number, height: number }, box: { width: number, height: number }, states: StateBox[], lanes: LaneLayout[], loops: EdgeLayout[], forward: EdgeLayout[] }} ChartLayout
 * @typedef {(text: string) => number} TextWidth the width a label's text takes, in px
 */

export const BOX_W = 140;
export const BOX_H = 44;
const COL = 400;
const ROW = 62;
const LANE = 18;
/** Approximate width of one character of a label (11 px sans-serif), when the text cannot be measured. */
const CHAR_W = 6.1;
/** @type {TextWidth} */
const estimate = (text) => text.length * CHAR_W;

/**
 * The chart's transitions with a target, one edge per (from, to), its labels `event [guard]`.
 * @param {Chart} chart
 * @returns {Array<{ from: string, to: string, labels: string[] }>}
 */
export function chartEdges(chart) {
  /** @type {Array<{ from: string, to: string, labels: string[] }>} */
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
  return edges;
}

/**
 * Columns: BFS depth from the initial state; a state reached only on restore sits one column
 * before its nearest target.
 * @param {Chart} chart
 * @param {Array<{ from: string, to: string }>} edges
 * @returns {{ depth: Map<string, number>, reachable: Set<string> }}
 */
export function chartDepths(chart, edges) {
  const names = chart.states.map((st) => st.name);
  const start = chart.initial ?? names[0] ?? '';
  /** @type {Map<string, number>} */
  const depth = new Map([[start, 0]]);
  const queue = [start];
  while (queue.length > 0) {
    const from = /** @type {string} */ (queue.shift());
    for (const e of edges) {
      if (e.from !== from || depth.has(e.to)) continue;
      depth.set(e.to, (depth.get(from) ?? 0) + 1);
      queue.push(e.to);
    }
  }
  const reachable = new Set(depth.keys());
  for (const name of names) {
    if (depth.has(name)) continue;
    const targets = edges.filter((e) => e.from === name && depth.has(e.to)).map((e) => depth.get(e.to) ?? 0);
    depth.set(name, targets.length > 0 ? Math.max(0, Math.min(...targets) - 1) : 0);
  }
  return { depth, reachable };
}

/**
 * @param {string} text
 * @param {number} x
 * @param {number} y
 * @param {Anchor} anchor
 * @param {TextWidth} [width]
 * @returns {Box}
 */
export function labelBox(text, x, y, anchor, width = estimate) {
  const w = width(text);
  const x1 = anchor === 'middle' ? x - w / 2 : anchor === 'end' ? x - w : x;
  return { x1, y1: y - 11, x2: x1 + w, y2: y + 3 };
}

/**
 * @param {Box} a
 * @param {Box} b
 */
export function overlaps(a, b) {
  return !(a.x2 < b.x1 || a.x1 > b.x2 || a.y2 < b.y1 || a.y1 > b.y2);
}

/**
 * Where everything of the chart goes. Labels go where they overlap no state and no other label:
 * along their curve, middle first. The drawing's box (`viewBox`) holds every state and every label.
 * @param {Chart} chart
 * @param {{ textWidth?: TextWidth }} [options] `textWidth`: the labels' real widths (the browser measures them); else estimated
 * @returns {ChartLayout}
 */
export function layoutChart(chart, options = {}) {
  const textWidth = options.textWidth ?? estimate;
  /** @param {string} text @param {number} x @param {number} y @param {Anchor} anchor */
  const boxOf = (text, x, y, anchor) => labelBox(text, x, y, anchor, textWidth);
  const names = chart.states.map((st) => st.name);
  const edges = chartEdges(chart);
  const { depth, reachable } = chartDepths(chart, edges);
  const depthOf = (/** @type {string} */ name) => depth.get(name) ?? 0;

  /** @type {Map<number, string[]>} */
  const columns = new Map();
  for (const name of [...names.filter((n) => reachable.has(n)), ...names.filter((n) => !reachable.has(n))]) {
    const d = depthOf(name);
    const column = columns.get(d) ?? [];
    column.push(name);
    columns.set(d, column);
  }

  // Backward edges share a lane per (target, label).
  /** @type {Array<{ key: string, to: string, label: string, sources: string[] }>} */
  const lanes = [];
  /** @type {Set<{ from: string, to: string, labels: string[] }>} */
  const backward = new Set();
  for (const e of edges) {
    if (e.from === e.to || depthOf(e.to) > depthOf(e.from)) continue;
    const key = `${e.to}|${e.labels.join(', ')}`;
    let lane = lanes.find((l) => l.key === key);
    if (!lane) lanes.push((lane = { key, to: e.to, label: e.labels.join(', '), sources: [] }));
    lane.sources.push(e.from);
    backward.add(e);
  }
  const top = 24 + lanes.length * LANE;
  /** @type {Map<string, Point>} */
  const pos = new Map();
  for (const [d, col] of columns) col.forEach((name, row) => pos.set(name, { x: 16 + d * COL, y: top + row * ROW }));
  const at = (/** @type {string} */ name) => pos.get(name) ?? { x: 0, y: 0 };
  const maxRows = Math.max(...[...columns.values()].map((c) => c.length));
  const width = 16 + Math.max(...columns.keys()) * COL + BOX_W + 90;
  const height = top + (maxRows - 1) * ROW + BOX_H + 12;

  /** @type {Box[]} */
  const placed = [...pos.values()].map((p) => ({ x1: p.x - 2, y1: p.y - 2, x2: p.x + BOX_W + 2, y2: p.y + BOX_H + 2 }));
  const free = (/** @type {Box} */ box) => placed.every((o) => !overlaps(box, o));

  /** @type {LaneLayout[]} */
  const laneLayouts = lanes.map((lane, i) => {
    const b = at(lane.to);
    const y = top - 12 - i * LANE;
    const tx = b.x + BOX_W / 2 + 24 - i * 16;
    let far = tx;
    const sources = lane.sources.map((from) => {
      const a = at(from);
      const gap = a.x - 14 - i * 6;
      const y1 = a.y + BOX_H / 2;
      far = Math.max(far, gap);
      return { from, d: `M${a.x},${y1} L${gap},${y1} L${gap},${y}`, reachable: reachable.has(from) };
    });
    /** @type {Label} */
    const label = { text: lane.label, x: (far + tx) / 2, y: y - 4, anchor: 'middle' };
    placed.push(boxOf(label.text, label.x, label.y, label.anchor));
    return { to: lane.to, sources, d: `M${far},${y} L${tx},${y} L${tx},${b.y}`, label };
  });

  /** @type {EdgeLayout[]} */
  const loops = edges
    .filter((x) => x.from === x.to)
    .map((e) => {
      const a = at(e.from);
      const x = a.x + BOX_W;
      const text = e.labels.join(', ');
      // Above the loop, else further up or right of it: the first place that is free.
      /** @type {Label[]} */
      const spots = [
        { text, x: x + 6, y: a.y - 10, anchor: 'start' },
        { text, x: x + 6, y: a.y - 24, anchor: 'start' },
        { text, x: x + 34, y: a.y + 4, anchor: 'start' },
        { text, x: x + 34, y: a.y + BOX_H / 2 + 4, anchor: 'start' },
      ];
      const label = spots.find((l) => free(boxOf(l.text, l.x, l.y, l.anchor))) ?? /** @type {Label} */ (spots[0]);
      placed.push(boxOf(label.text, label.x, label.y, label.anchor));
      return {
        from: e.from,
        to: e.to,
        d: `M${x - 24},${a.y} C${x - 10},${a.y - 26} ${x + 30},${a.y - 6} ${x},${a.y + 12}`,
        reachable: reachable.has(e.from),
        label,
      };
    });

  // Ports: a state's outgoing forward edges leave its right side spread out in target order, incoming ones arrive spread on its left.
  const forward = edges.filter((x) => !backward.has(x) && x.from !== x.to);
  /**
   * @param {string} name
   * @param {'from' | 'to'} key
   * @param {'from' | 'to'} other
   */
  const port = (name, key, other) => {
    const mine = forward.filter((x) => x[key] === name).sort((p, q) => at(p[other]).y - at(q[other]).y);
    return (/** @type {(typeof forward)[number]} */ e) =>
      at(name).y + (BOX_H * (mine.indexOf(e) + 1)) / (mine.length + 1);
  };
  const ordered = [...forward].sort((p, q) => Number(reachable.has(q.from)) - Number(reachable.has(p.from)));
  /** @type {EdgeLayout[]} */
  const forwardLayouts = ordered.map((e) => {
    const a = at(e.from);
    const b = at(e.to);
    const x1 = a.x + BOX_W;
    const y1 = port(e.from, 'from', 'to')(e);
    const x2 = b.x;
    const y2 = port(e.to, 'to', 'from')(e);
    const mx = (x1 + x2) / 2;
    const full = e.labels.join(', ');
    let text = full;
    const point = (/** @type {number} */ t) => {
      const u = 1 - t;
      return {
        x: u * u * u * x1 + 3 * u * u * t * mx + 3 * u * t * t * mx + t * t * t * x2,
        y: u * u * u * y1 + 3 * u * u * t * y1 + 3 * u * t * t * y2 + t * t * t * y2,
      };
    };
    /** @type {{ x: number, y: number, box: Box } | null} */
    let best = null;
    // The whole label where it fits; else, for a crowded edge, its first event and an ellipsis.
    for (const candidate of e.labels.length > 1 ? [full, `${e.labels[0]} …`] : [full]) {
      for (const t of [0.5, 0.4, 0.6, 0.3, 0.7, 0.2, 0.8, 0.12, 0.88, 0.45, 0.55, 0.35, 0.65, 0.25, 0.75]) {
        const p = point(t);
        for (const dy of [-4, 13, -16, 24, -27]) {
          const box = boxOf(candidate, p.x, p.y + dy, 'middle');
          if (free(box)) {
            best = { x: p.x, y: p.y + dy, box };
            break;
          }
        }
        if (best) break;
      }
      if (best) {
        text = candidate;
        break;
      }
    }
    if (!best) {
      const p = point(0.5);
      best = { x: p.x, y: p.y - 4, box: boxOf(text, p.x, p.y - 4, 'middle') };
    }
    placed.push(best.box);
    return {
      from: e.from,
      to: e.to,
      d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`,
      reachable: reachable.has(e.from),
      label: { text, x: best.x, y: best.y, anchor: 'middle', ...(text === full ? {} : { full }) },
    };
  });

  /** @type {StateBox[]} */
  const states = chart.states.map((st) => ({
    name: st.name,
    ...at(st.name),
    reachable: reachable.has(st.name),
    initial: st.name === chart.initial,
    invokes: st.invokes ?? [],
  }));
  // Every label inside the drawing: the box grows to the furthest one (a loop's label right of the last column).
  const labels = [...laneLayouts, ...loops, ...forwardLayouts].map((e) =>
    boxOf(e.label.text, e.label.x, e.label.y, e.label.anchor),
  );
  const x0 = Math.min(0, ...labels.map((b) => b.x1 - 4));
  const y0 = Math.min(0, ...labels.map((b) => b.y1 - 4));
  const x1 = Math.max(width, ...labels.map((b) => b.x2 + 4));
  const y1 = Math.max(height, ...labels.map((b) => b.y2 + 4));
  return {
    width: x1 - x0,
    height: y1 - y0,
    viewBox: { x: x0, y: y0, width: x1 - x0, height: y1 - y0 },
    box: { width: BOX_W, height: BOX_H },
    states,
    lanes: laneLayouts,
    loops,
    forward: forwardLayouts,
  };
}
