import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { percentile } from '../bench/support/harness.ts';

/**
 * `node --import tsx scripts/plot-bench.ts <bench-results.json> <out-dir>`
 *
 * Reads the document `npm run bench -- --json` prints
 * (`{"benchmarks":[…],"machine":{…}}`; npm's own banner lines before it are
 * skipped) and writes three plain SVG files, drawn here by hand (no plotting
 * library):
 * - throughput-vs-workers.svg: sessions/s with 1, 2 and 4 worker processes
 *   (the scaling benchmark), with the rate at which this machine spawns the
 *   same fake agent directly (the e2e benchmark's baseline) and linear scaling
 *   from one worker for reference;
 * - cancel-latency.svg: every cancel latency sample of the queue benchmark,
 *   cooperative and SIGINT-ignoring agents, on a log scale, with p50 and p99;
 * - peers.svg: sessiond next to Restate (the peers benchmark's last line):
 *   sessions/s with the fake agent process, messages made durable per second,
 *   cancel → final state p99, one panel each with its own scale.
 * Exit 1 when a plot cannot be drawn (its benchmark failed or did not run; the
 * other plot is still written), 2 on bad arguments.
 */

type Json = Record<string, unknown>;

const FONT = 'DejaVu Sans, Helvetica, Arial, sans-serif';
const INK = '#222';
const GRID = '#ddd';
const MUTED = '#666';
const BLUE = '#3b6ea8';
const ORANGE = '#d9822b';
const GREEN = '#3a8a4a';

function esc(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;');
}

function fmt(value: number, digits = 0): string {
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

interface TextOptions {
  size?: number;
  anchor?: 'start' | 'middle' | 'end';
  weight?: 'normal' | 'bold';
  fill?: string;
  rotate?: number;
  /** A white outline, so that the text stays readable over lines. */
  halo?: boolean;
}

function text(x: number, y: number, content: string, o: TextOptions = {}): string {
  const transform = o.rotate === undefined ? '' : ` transform="rotate(${o.rotate} ${x.toFixed(1)} ${y.toFixed(1)})"`;
  const halo = o.halo === true ? ' stroke="#fff" stroke-width="4" stroke-linejoin="round" paint-order="stroke"' : '';
  return `<text x="${x.toFixed(1)}" y="${y.toFixed(1)}" font-family="${FONT}" font-size="${o.size ?? 13}" text-anchor="${o.anchor ?? 'start'}" font-weight="${o.weight ?? 'normal'}" fill="${o.fill ?? INK}"${halo}${transform}>${esc(content)}</text>`;
}

function line(x1: number, y1: number, x2: number, y2: number, stroke: string, width = 1, dash?: string): string {
  return `<line x1="${x1.toFixed(1)}" y1="${y1.toFixed(1)}" x2="${x2.toFixed(1)}" y2="${y2.toFixed(1)}" stroke="${stroke}" stroke-width="${width}"${dash === undefined ? '' : ` stroke-dasharray="${dash}"`}/>`;
}

function svg(width: number, height: number, body: string[]): string {
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">`,
    `<rect x="0" y="0" width="${width}" height="${height}" fill="#fff"/>`,
    ...body,
    '</svg>',
    '',
  ].join('\n');
}

/** A "nice" step (1, 2 or 5 × 10^k) giving about `count` ticks up to `max`. */
function niceStep(max: number, count: number): number {
  const raw = max / count;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * magnitude >= raw) return m * magnitude;
  return 10 * magnitude;
}

function num(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

function numbers(value: unknown): number[] | null {
  return Array.isArray(value) && value.every((v) => typeof v === 'number' && Number.isFinite(v))
    ? (value as number[])
    : null;
}

/** A picture of `width` × `height` and the plot area inside these margins. */
function frame(width: number, height: number, margin: { left: number; right: number; top: number; bottom: number }) {
  return {
    width,
    height,
    left: margin.left,
    top: margin.top,
    plotW: width - margin.left - margin.right,
    plotH: height - margin.top - margin.bottom,
  };
}

function machineLine(machine: Json | undefined): string {
  if (machine === undefined) return '';
  const parts = [
    typeof machine.cpus === 'number' ? `${machine.cpus} cores` : null,
    typeof machine.cpuModel === 'string' ? machine.cpuModel : null,
    typeof machine.memoryGb === 'number' ? `${machine.memoryGb} GiB` : null,
    typeof machine.node === 'string' ? `Node ${machine.node}` : null,
    typeof machine.os === 'string' ? machine.os : null,
  ].filter((p): p is string => p !== null);
  return parts.join(', ');
}

// ---------------------------------------------------------------- throughput against workers

function throughputSvg(scaling: Json, e2e: Json | undefined, machine: Json | undefined): string {
  const perSec = scaling.sessionsPerSec as Record<string, unknown> | undefined;
  const workers = ['1', '2', '4'];
  const values = workers.map((w) => num(perSec?.[w]));
  if (values.some((v) => v === null))
    throw new Error('scaling.sessionsPerSec must hold numbers for 1, 2 and 4 workers');
  const rates = values as number[];
  const agent = scaling.agent === 'node' ? 'node' : 'sh';
  const spawnSource = agent === 'sh' ? (e2e?.cheapAgent as Json | undefined) : e2e;
  const spawnRate = num(spawnSource?.baselineSpawnsPerSec);
  const spawnConcurrency = num(e2e?.concurrency);
  const one = rates[0] ?? 0;
  const concurrency = num(scaling.concurrencyPerWorker);
  const cores = num(scaling.cores) ?? num(machine?.cpus);

  const { width, height, left, top, plotW, plotH } = frame(760, 470, { left: 80, right: 250, top: 78, bottom: 70 });
  const yMax = Math.max(...rates, spawnRate ?? 0, one * 2) * 1.12;
  const step = niceStep(yMax, 6);
  const top_ = Math.ceil(yMax / step) * step;
  const y = (v: number): number => top + plotH - (v / top_) * plotH;
  const body: string[] = [];
  body.push(text(width / 2, 28, 'Throughput against worker processes', { size: 18, anchor: 'middle', weight: 'bold' }));
  body.push(
    text(
      width / 2,
      50,
      `sessions/s, each one turn of a fake pi (${agent === 'sh' ? '/bin/sh script' : 'Node process'}); ${concurrency === null ? '' : `concurrency ${concurrency} per worker; `}${cores === null ? '' : `${cores} cores`}`,
      { size: 12, anchor: 'middle', fill: MUTED },
    ),
  );
  for (let v = 0; v <= top_ + 1e-9; v += step) {
    body.push(line(left, y(v), left + plotW, y(v), GRID));
    body.push(text(left - 8, y(v) + 4, fmt(v), { size: 12, anchor: 'end', fill: MUTED }));
  }
  body.push(text(22, top + plotH / 2, 'sessions per second', { size: 13, anchor: 'middle', rotate: -90 }));
  const slot = plotW / workers.length;
  const barW = slot * 0.5;
  const labels: string[] = [];
  workers.forEach((w, i) => {
    const v = rates[i] ?? 0;
    const cx = left + slot * (i + 0.5);
    body.push(
      `<rect x="${(cx - barW / 2).toFixed(1)}" y="${y(v).toFixed(1)}" width="${barW.toFixed(1)}" height="${(top + plotH - y(v)).toFixed(1)}" fill="${BLUE}"/>`,
    );
    labels.push(text(cx, y(v) - 7, `${fmt(v, 1)}/s`, { size: 13, anchor: 'middle', weight: 'bold', halo: true }));
    if (i > 0 && one > 0)
      body.push(
        text(cx, y(v) + 18, `${(v / one).toFixed(2)}×`, { size: 12, anchor: 'middle', fill: '#fff', weight: 'bold' }),
      );
    body.push(text(cx, top + plotH + 20, `${w} worker${w === '1' ? '' : 's'}`, { size: 13, anchor: 'middle' }));
  });
  body.push(line(left, top + plotH, left + plotW, top + plotH, INK));
  body.push(line(left, top, left, top + plotH, INK));
  // Linear scaling from one worker, for reference.
  const points = workers.map((w, i) => `${(left + slot * (i + 0.5)).toFixed(1)},${y(one * Number(w)).toFixed(1)}`);
  body.push(`<clipPath id="plot-area"><rect x="${left}" y="${top}" width="${plotW}" height="${plotH}"/></clipPath>`);
  body.push(
    `<polyline points="${points.join(' ')}" fill="none" stroke="${GREEN}" stroke-width="1.5" stroke-dasharray="2 4" clip-path="url(#plot-area)"/>`,
  );
  const legendX = left + plotW + 20;
  let legendY = top + 10;
  const legend = (swatch: string, lines: string[]): void => {
    body.push(swatch.replaceAll('LX', legendX.toFixed(1)).replaceAll('LY', legendY.toFixed(1)));
    lines.forEach((l, i) => body.push(text(legendX + 30, legendY + 4 + i * 15, l, { size: 12 })));
    legendY += 18 + lines.length * 15;
  };
  legend(`<rect x="LX" y="${(legendY - 6).toFixed(1)}" width="22" height="12" fill="${BLUE}"/>`, [
    'measured (median)',
    'worker processes share',
    'the cores with redis-server,',
    'the producer and the agents',
  ]);
  legend(line(legendX, legendY, legendX + 22, legendY, GREEN, 1.5, '2 4'), ['linear scaling', 'from 1 worker']);
  if (spawnRate !== null) {
    body.push(line(left, y(spawnRate), left + plotW, y(spawnRate), ORANGE, 2, '7 4'));
    labels.push(
      text(left + plotW - 4, y(spawnRate) - 6, `${fmt(spawnRate, 1)}/s`, {
        size: 12,
        anchor: 'end',
        fill: ORANGE,
        weight: 'bold',
        halo: true,
      }),
    );
    legend(line(legendX, legendY, legendX + 22, legendY, ORANGE, 2, '7 4'), [
      'same fake agent spawned',
      `directly by one process${spawnConcurrency === null ? '' : `,`}`,
      spawnConcurrency === null ? '(e2e baseline)' : `${spawnConcurrency} at a time (e2e baseline)`,
    ]);
  }
  body.push(...labels);
  const m = machineLine(machine);
  if (m !== '') body.push(text(width / 2, height - 14, m, { size: 11, anchor: 'middle', fill: MUTED }));
  return svg(width, height, body);
}

// ---------------------------------------------------------------- cancel latency

function cancelSvg(queue: Json, machine: Json | undefined): string {
  const cooperative = numbers(queue.cancelSamplesMs);
  const stubborn = numbers(queue.cancelStubbornSamplesMs);
  if (cooperative === null || stubborn === null || cooperative.length === 0 || stubborn.length === 0) {
    throw new Error(
      'queue.cancelSamplesMs and queue.cancelStubbornSamplesMs must be arrays of numbers (run the queue benchmark with its part 3)',
    );
  }
  const rows = [
    { label: 'cooperative', detail: 'exits on SIGTERM', samples: cooperative, color: BLUE },
    { label: 'stubborn', detail: 'ignores SIGINT/SIGTERM', samples: stubborn, color: ORANGE },
  ];
  const { width, height, left, top, plotW, plotH } = frame(800, 400, { left: 170, right: 40, top: 80, bottom: 80 });
  const all = [...cooperative, ...stubborn].map((v) => Math.max(v, 1));
  const lo = 10 ** Math.floor(Math.log10(Math.min(...all)));
  const hi = 10 ** Math.ceil(Math.log10(Math.max(...all)));
  const x = (v: number): number =>
    left + ((Math.log10(Math.max(v, 1)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * plotW;
  const body: string[] = [];
  body.push(text(width / 2, 28, 'Cancel latency', { size: 18, anchor: 'middle', weight: 'bold' }));
  body.push(
    text(
      width / 2,
      50,
      `cancel() called in another process → the turn's "cancelled" transition; every sample, log scale (${cooperative.length} + ${stubborn.length} samples)`,
      {
        size: 12,
        anchor: 'middle',
        fill: MUTED,
      },
    ),
  );
  for (let decade = lo; decade <= hi; decade *= 10) {
    for (const m of [1, 2, 5]) {
      const v = decade * m;
      if (v > hi) break;
      body.push(line(x(v), top, x(v), top + plotH, m === 1 ? '#ccc' : '#eee'));
      body.push(
        text(x(v), top + plotH + 18, v >= 1000 ? `${v / 1000} s` : `${v} ms`, {
          size: 12,
          anchor: 'middle',
          fill: m === 1 ? INK : MUTED,
        }),
      );
    }
  }
  body.push(text(left + plotW / 2, top + plotH + 42, 'latency (log scale)', { size: 13, anchor: 'middle' }));
  body.push(line(left, top + plotH, left + plotW, top + plotH, INK));
  const rowH = plotH / rows.length;
  rows.forEach((row, r) => {
    const cy = top + rowH * (r + 0.5);
    body.push(text(left - 12, cy - 3, row.label, { size: 14, anchor: 'end', weight: 'bold' }));
    body.push(text(left - 12, cy + 14, row.detail, { size: 11, anchor: 'end', fill: MUTED }));
    // Deterministic jitter, so that samples of equal value do not hide each other.
    row.samples.forEach((v, i) => {
      const jitter = (((i * 37) % 17) / 16 - 0.5) * rowH * 0.45;
      body.push(
        `<circle cx="${x(v).toFixed(1)}" cy="${(cy + jitter).toFixed(1)}" r="4" fill="${row.color}" fill-opacity="0.55" stroke="${row.color}" stroke-width="0.8"/>`,
      );
    });
    for (const [p, dash] of [
      [50, undefined],
      [99, '4 3'],
    ] as const) {
      const v = percentile(row.samples, p);
      const px = x(v);
      body.push(line(px, cy - rowH * 0.36, px, cy + rowH * 0.36, INK, 2, dash));
      body.push(
        text(px, cy - rowH * 0.36 - 5, `p${p} ${fmt(v)} ms`, {
          size: 11,
          anchor: p === 50 ? 'end' : 'start',
          weight: 'bold',
          halo: true,
        }),
      );
    }
  });
  const m = machineLine(machine);
  body.push(
    text(width / 2, height - 12, `${m}${m === '' ? '' : '; '}solid: p50, dashed: p99`, {
      size: 11,
      anchor: 'middle',
      fill: MUTED,
    }),
  );
  return svg(width, height, body);
}

// ---------------------------------------------------------------- peers

function peersSvg(peers: Json, machine: Json | undefined): string {
  const pair = (a: unknown, b: unknown, what: string): [number, number] => {
    const x = num(a);
    const y = num(b);
    if (x === null || y === null) throw new Error(`peers: ${what} must be two numbers`);
    return [x, y];
  };
  const cancel = peers.cancelP99Ms as Json | undefined;
  const panels: Array<{ title: string; unit: string; values: [number, number]; lowerIsBetter: boolean }> = [
    {
      title: 'sessions/s, fake agent process',
      unit: '/s',
      values: pair(peers.sessiondSessionsPerSec, peers.restateSessionsPerSec, 'sessions/s'),
      lowerIsBetter: false,
    },
    {
      title: 'messages made durable/s',
      unit: '/s',
      values: pair(peers.sessiondMessagesPerSec, peers.restateMessagesPerSec, 'messages/s'),
      lowerIsBetter: false,
    },
    {
      title: 'cancel → final state, p99',
      unit: ' ms',
      values: pair(cancel?.sessiond, cancel?.restate, 'cancelP99Ms'),
      lowerIsBetter: true,
    },
  ];
  const { width, height, top, plotH } = frame(780, 420, { left: 30, right: 30, top: 92, bottom: 70 });
  const body: string[] = [];
  body.push(
    text(width / 2, 28, 'sessiond and Restate, the same durable sessions', {
      size: 18,
      anchor: 'middle',
      weight: 'bold',
    }),
  );
  body.push(
    text(width / 2, 50, 'one run, the two sides alternating; each panel on its own scale from 0', {
      size: 12,
      anchor: 'middle',
      fill: MUTED,
    }),
  );
  const legendY = 70;
  body.push(`<rect x="${width / 2 - 120}" y="${legendY - 10}" width="12" height="12" fill="${BLUE}"/>`);
  body.push(text(width / 2 - 102, legendY, 'sessiond', { size: 12 }));
  body.push(`<rect x="${width / 2 + 20}" y="${legendY - 10}" width="12" height="12" fill="${ORANGE}"/>`);
  body.push(text(width / 2 + 38, legendY, 'Restate', { size: 12 }));
  const panelW = (width - 60) / panels.length;
  panels.forEach((panel, i) => {
    const x0 = 30 + i * panelW;
    const max = Math.max(...panel.values) * 1.15 || 1;
    const baseY = top + plotH;
    body.push(line(x0 + 20, baseY, x0 + panelW - 20, baseY, INK));
    const barW = panelW * 0.26;
    panel.values.forEach((v, j) => {
      const h = (v / max) * (plotH - 20);
      const bx = x0 + panelW / 2 + (j === 0 ? -barW - 6 : 6);
      body.push(
        `<rect x="${bx.toFixed(1)}" y="${(baseY - h).toFixed(1)}" width="${barW.toFixed(1)}" height="${h.toFixed(1)}" fill="${j === 0 ? BLUE : ORANGE}"/>`,
      );
      body.push(
        text(bx + barW / 2, baseY - h - 6, `${fmt(v, panel.unit === '/s' && v < 100 ? 1 : 0)}${panel.unit}`, {
          size: 12,
          anchor: 'middle',
          weight: 'bold',
        }),
      );
    });
    body.push(text(x0 + panelW / 2, baseY + 20, panel.title, { size: 12, anchor: 'middle' }));
    body.push(
      text(x0 + panelW / 2, baseY + 36, panel.lowerIsBetter ? '(lower is better)' : '(higher is better)', {
        size: 11,
        anchor: 'middle',
        fill: MUTED,
      }),
    );
  });
  body.push(text(width / 2, height - 12, machineLine(machine), { size: 11, anchor: 'middle', fill: MUTED }));
  return svg(width, height, body);
}

// ---------------------------------------------------------------- main

/** The JSON document in `raw`: the whole of it, or its last line that is one (npm prints a banner before it). */
function parseResults(raw: string): { benchmarks: Json[]; machine?: Json } {
  const candidates = [raw, ...raw.split('\n').reverse()];
  for (const candidate of candidates) {
    const trimmed = candidate.trim();
    if (!trimmed.startsWith('{')) continue;
    try {
      const doc = JSON.parse(trimmed) as Json;
      if (Array.isArray(doc.benchmarks)) return doc as { benchmarks: Json[]; machine?: Json };
    } catch {
      // not this one
    }
  }
  throw new Error(
    'no {"benchmarks":[…]} document found (make it with: npm run --silent bench -- --json > bench-results.json)',
  );
}

function main(argv: readonly string[]): number {
  const [input, outDir] = argv;
  if (input === undefined || outDir === undefined || argv.length > 2) {
    console.error('usage: node --import tsx scripts/plot-bench.ts <bench-results.json> <out-dir>');
    return 2;
  }
  let doc: ReturnType<typeof parseResults>;
  try {
    doc = parseResults(readFileSync(input, 'utf8'));
  } catch (error) {
    console.error(`${input}: ${(error as Error).message}`);
    return 2;
  }
  const bench = (name: string): Json | undefined => doc.benchmarks.find((b) => b.bench === name && b.failed !== true);
  mkdirSync(outDir, { recursive: true });
  let failed = false;
  const plots: Array<[string, () => string]> = [
    [
      'throughput-vs-workers.svg',
      () => {
        const scaling = bench('scaling');
        if (scaling === undefined) throw new Error('no (successful) scaling benchmark in the results');
        return throughputSvg(scaling, bench('e2e'), doc.machine);
      },
    ],
    [
      'cancel-latency.svg',
      () => {
        const queue = bench('queue');
        if (queue === undefined) throw new Error('no (successful) queue benchmark in the results');
        return cancelSvg(queue, doc.machine);
      },
    ],
    [
      'peers.svg',
      () => {
        const peers = bench('peers');
        if (peers === undefined) throw new Error('no (successful) peers benchmark in the results');
        return peersSvg(peers, doc.machine);
      },
    ],
  ];
  for (const [file, draw] of plots) {
    try {
      const path = join(outDir, file);
      writeFileSync(path, draw());
      console.log(`wrote ${path}`);
    } catch (error) {
      failed = true;
      console.error(`${file}: not written: ${(error as Error).message}`);
    }
  }
  return failed ? 1 : 0;
}

process.exitCode = main(process.argv.slice(2));
