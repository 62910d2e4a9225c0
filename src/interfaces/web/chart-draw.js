// @ts-check
// Draws a chart layout (chart-layout.js) as SVG: the current state and its outgoing edges live, the
// edges of the path taken (`from>to`) marked taken.

import { layoutChart } from './chart-layout.js';
import { s } from './dom.js';

/**
 * @param {import('./chart-layout.js').Chart} chart
 * @param {string | null} current
 * @param {Set<string>} [taken] the transitions of the path taken, as `from>to`
 * @returns {SVGSVGElement}
 */
export function renderChart(chart, current, taken = new Set()) {
  const layout = layoutChart(chart, { textWidth: labelWidth() });
  const { width, height, viewBox } = layout;
  const { width: boxW, height: boxH } = layout.box;
  const root = /** @type {SVGSVGElement} */ (
    s('svg', {
      viewBox: `${viewBox.x} ${viewBox.y} ${viewBox.width} ${viewBox.height}`,
      width,
      height,
      role: 'img',
      'aria-label': 'session statechart',
      'data-testid': 'chart-svg',
    })
  );
  const marker = (/** @type {string} */ id, /** @type {string} */ cls) =>
    s(
      'marker',
      {
        id,
        class: cls,
        viewBox: '0 0 10 10',
        refX: 9,
        refY: 5,
        markerWidth: 7,
        markerHeight: 7,
        orient: 'auto-start-reverse',
      },
      s('path', { d: 'M0,0 L10,5 L0,10 z' }),
    );
  root.append(s('defs', {}, marker('arrow', ''), marker('arrow-live', 'live'), marker('arrow-taken', 'taken')));
  const edgeLayer = s('g', {});
  const labelLayer = s('g', {});
  root.append(edgeLayer, labelLayer);

  /**
   * @param {import('./chart-layout.js').Label} l
   * @param {boolean} live
   * @param {boolean} restore
   */
  const label = (l, live, restore, was = false) =>
    s(
      'text',
      {
        x: l.x,
        y: l.y,
        'text-anchor': l.anchor,
        class: `label${live ? ' live' : ''}${restore ? ' restore' : ''}${was ? ' taken' : ''}`,
      },
      s('tspan', { x: l.x, dy: 0 }, l.text),
      // A label shortened to fit says all of it on hover.
      l.full === undefined ? null : s('title', {}, l.full),
    );
  /**
   * @param {string} d
   * @param {boolean} live
   * @param {boolean} restore
   */
  const path = (d, live, restore, was = false) =>
    s('path', {
      d,
      class: `${live ? 'live' : ''}${restore ? ' restore' : ''}${was ? ' taken' : ''}`,
      'marker-end': `url(#${was ? 'arrow-taken' : live ? 'arrow-live' : 'arrow'})`,
    });

  for (const lane of layout.lanes) {
    const live = lane.sources.some((src) => src.from === current);
    const was = lane.sources.some((src) => taken.has(`${src.from}>${lane.to}`));
    const g = s('g', { class: `edge back${live ? ' live' : ''}${was ? ' taken' : ''}`, 'data-to': lane.to });
    for (const src of lane.sources) {
      const srcTaken = taken.has(`${src.from}>${lane.to}`);
      g.append(
        s('path', {
          d: src.d,
          class: `${src.from === current ? 'live' : ''}${src.reachable ? '' : ' restore'}${srcTaken ? ' taken' : ''}`,
          'data-from': src.from,
        }),
      );
    }
    g.append(path(lane.d, live, false, was));
    edgeLayer.append(g);
    labelLayer.append(label(lane.label, live, false, was));
  }

  for (const e of [...layout.loops, ...layout.forward]) {
    const live = e.from === current;
    const was = taken.has(`${e.from}>${e.to}`);
    edgeLayer.append(
      s(
        'g',
        { class: `edge${live ? ' live' : ''}${was ? ' taken' : ''}`, 'data-from': e.from, 'data-to': e.to },
        path(e.d, live, !e.reachable, was),
      ),
    );
    labelLayer.append(label(e.label, live, !e.reachable, was));
  }

  for (const st of layout.states) {
    const cls = [
      'state',
      st.name === current ? 'current' : '',
      st.reachable ? '' : 'restore',
      st.initial ? 'initial' : '',
    ]
      .filter(Boolean)
      .join(' ');
    root.append(
      s(
        'g',
        { class: cls, 'data-state': st.name, 'data-current': st.name === current ? 'true' : 'false' },
        s('rect', { x: st.x, y: st.y, width: boxW, height: boxH, rx: 8 }),
        s(
          'text',
          { class: 'name', x: st.x + boxW / 2, y: st.y + (st.invokes.length > 0 ? 19 : 27), 'text-anchor': 'middle' },
          st.name,
        ),
        st.invokes.length > 0
          ? s(
              'text',
              { class: 'invoke', x: st.x + boxW / 2, y: st.y + 35, 'text-anchor': 'middle' },
              `invoke ${st.invokes.join(', ')}`,
            )
          : null,
      ),
    );
  }
  return root;
}

/**
 * The width of a label as the page draws it: its text measured in the page's font at the labels' size, bold
 * (a label of the path taken or of the current state is bold; the layout does not change with the state), and
 * the 2 px of white halo on each side. Without a canvas (no layout engine), the layout's estimate.
 * @returns {import('./chart-layout.js').TextWidth | undefined}
 */
function labelWidth() {
  const context = document.createElement('canvas').getContext('2d');
  if (context === null) return undefined;
  context.font = `600 11px ${window.getComputedStyle(document.body).fontFamily}`;
  /** @type {Map<string, number>} */
  const widths = new Map();
  return (text) => {
    let w = widths.get(text);
    if (w === undefined) widths.set(text, (w = context.measureText(text).width + 4));
    return w;
  };
}
