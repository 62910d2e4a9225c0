import { performance } from 'node:perf_hooks';
import { PiMapper } from '../src/agents/pi/mapper.ts';
import type { AttemptExit } from '../src/agents/shared/agent-mapper.ts';
import { LineSplitter } from '../src/process/split-lines.ts';
import type { CliMessage } from '../src/index.ts';
import { measureAgentMappers } from './agent-mappers.ts';
import { BenchFailure } from './support/benchmark.ts';
import { generatePiTranscript, type PiTranscript } from './support/pi-transcript.ts';
import { mb, median, round, time, type Timing } from './support/timing.ts';

/**
 * PiMapper throughput on a generated pi transcript with long, cumulatively
 * snapshotted messages, against a baseline that only splits the same bytes
 * into lines and JSON.parses each line. Both sides split with the same
 * LineSplitter fed the same 64 KiB chunks, so the ratio isolates the mapper.
 * Two sizes (the larger about twice the smaller) show whether the cost per MB
 * stays flat as the transcript grows.
 */
export const name = 'mapper';

const SEED = 0x5e5510d;
const SMALL_MIN_BYTES = 25e6;
const LARGE_MIN_BYTES = 50e6;
const CHUNK_BYTES = 64 * 1024; // what a pipe read delivers
const REPETITIONS = 7;
const TARGET_RATIO = 0.5;
const CLEAN_EXIT: AttemptExit = { exitCode: 0, signal: null, stopReason: null, stderrTail: '' };

interface SizeResult {
  bytes: number;
  mapper: Timing[];
  baseline: Timing[];
}

export async function run(log: (line: string) => void = console.log): Promise<Record<string, unknown>> {
  log(
    `PiMapper.push vs. JSON.parse per line, on generated pi 0.73 transcripts (both split by LineSplitter, ${CHUNK_BYTES / 1024} KiB chunks)`,
  );
  const started = performance.now();
  const small = generatePiTranscript({ seed: SEED, minBytes: SMALL_MIN_BYTES });
  const large = generatePiTranscript({ seed: SEED, minBytes: Math.max(LARGE_MIN_BYTES, 2 * small.bytes.length) });
  log(`  generated in ${((performance.now() - started) / 1000).toFixed(1)} s (seed 0x${SEED.toString(16)}):`);
  for (const t of [small, large]) log(`    ${describe(t)}`);

  for (const t of [small, large]) verify(t);
  log(`  check ok at both sizes: assistant text, thoughts, tool calls and results, terminal.completed`);

  // Warm-up: both measured paths, untimed, on the smaller transcript.
  measureMapper(small);
  measureBaseline(small);

  const results: SizeResult[] = [small, large].map((t) => ({ bytes: t.bytes.length, mapper: [], baseline: [] }));
  for (let rep = 0; rep < REPETITIONS; rep += 1) {
    [small, large].forEach((t, i) => {
      const result = results[i];
      if (result === undefined) return;
      // Alternate which side goes first, so neither always inherits the other's heap.
      if (rep % 2 === 0) {
        result.baseline.push(measureBaseline(t));
        result.mapper.push(measureMapper(t));
      } else {
        result.mapper.push(measureMapper(t));
        result.baseline.push(measureBaseline(t));
      }
    });
  }

  log(`  best of ${REPETITIONS} runs each after a warm-up, wall clock (median in brackets):`);
  log(
    `    ${'size'.padEnd(9)} ${'baseline: split + JSON.parse'.padEnd(36)} ${'PiMapper: split + push'.padEnd(36)} ratio`,
  );
  const rows = results.map((r) => {
    const size = mb(r.bytes);
    const mapperMs = Math.min(...r.mapper.map((x) => x.wallMs));
    const baselineMs = Math.min(...r.baseline.map((x) => x.wallMs));
    const row = {
      size,
      mapperMbPerSec: size / (mapperMs / 1000),
      baselineMbPerSec: size / (baselineMs / 1000),
      mapperMsPerMb: mapperMs / size,
      baselineMsPerMb: baselineMs / size,
      cpuRatio: Math.min(...r.baseline.map((x) => x.cpuMs)) / Math.min(...r.mapper.map((x) => x.cpuMs)),
    };
    const cell = (timings: Timing[], mbPerSec: number, msPerMb: number): string =>
      `${mbPerSec.toFixed(1).padStart(6)} MB/s ${msPerMb.toFixed(2).padStart(6)} ms/MB (${(size / (median(timings.map((x) => x.wallMs)) / 1000)).toFixed(1)} MB/s)`.padEnd(
        36,
      );
    log(
      `    ${`${size.toFixed(1)} MB`.padEnd(9)} ${cell(r.baseline, row.baselineMbPerSec, row.baselineMsPerMb)} ${cell(r.mapper, row.mapperMbPerSec, row.mapperMsPerMb)} ${(row.mapperMbPerSec / row.baselineMbPerSec).toFixed(3)}`,
    );
    return row;
  });
  const [first, last] = [rows[0], rows[rows.length - 1]];
  if (first === undefined || last === undefined) throw new Error('no measurements');
  const linearity = last.mapperMsPerMb / first.mapperMsPerMb;
  const baselineLinearity = last.baselineMsPerMb / first.baselineMsPerMb;
  const ratio = last.mapperMbPerSec / last.baselineMbPerSec;
  log(
    `  linearity, ms/MB at ${last.size.toFixed(1)} MB ÷ ms/MB at ${first.size.toFixed(1)} MB (1.00 = linear): PiMapper ${linearity.toFixed(3)}, baseline ${baselineLinearity.toFixed(3)}`,
  );
  log(
    `  cross-check on process CPU time (best of ${REPETITIONS}), ratio: ${rows.map((r) => `${r.cpuRatio.toFixed(3)} at ${r.size.toFixed(1)} MB`).join(', ')}`,
  );
  log(
    `  ratio at ${last.size.toFixed(1)} MB: ${ratio.toFixed(3)} (target ≥ ${TARGET_RATIO}): ${ratio >= TARGET_RATIO ? 'ok' : 'BELOW TARGET'}`,
  );
  const agents = measureAgentMappers(log);

  return {
    bench: name,
    mbPerSec: round(last.mapperMbPerSec, 1),
    baselineMbPerSec: round(last.baselineMbPerSec, 1),
    ratio: round(ratio, 3),
    sizesMb: rows.map((r) => round(r.size, 1)),
    linearity: round(linearity, 3),
    agents,
  };
}

// ---------------------------------------------------------------- the two measured paths

/** The splitting both sides share: 64 KiB chunks through LineSplitter. */
function forEachLine(bytes: Buffer, onLine: (line: string) => void): void {
  const splitter = new LineSplitter();
  for (let offset = 0; offset < bytes.length; offset += CHUNK_BYTES) {
    for (const line of splitter.push(bytes.subarray(offset, offset + CHUNK_BYTES))) onLine(line);
  }
  const rest = splitter.flush();
  if (rest !== undefined) onLine(rest);
}

function normalize(bytes: Buffer, onMessage: (message: CliMessage) => void): void {
  const mapper = new PiMapper();
  forEachLine(bytes, (line) => {
    for (const message of mapper.push(line)) onMessage(message);
  });
  for (const message of mapper.complete(CLEAN_EXIT)) onMessage(message);
}

function measureMapper(t: PiTranscript): Timing {
  let textChars = 0;
  let terminal = '';
  const timing = time(() =>
    normalize(t.bytes, (message) => {
      if (message.type === 'assistant') textChars += message.content.text.length;
      else if (message.type === 'terminal.completed' || message.type === 'terminal.failed') terminal = message.type;
    }),
  );
  // A cheap check on every timed run; `verify` does the full one.
  if (textChars !== t.text.length || terminal !== 'terminal.completed') {
    throw new BenchFailure(
      `timed run: ${textChars} assistant chars (expected ${t.text.length}), terminal ${terminal || 'missing'}`,
    );
  }
  return timing;
}

function measureBaseline(t: PiTranscript): Timing {
  let events = 0;
  const timing = time(() =>
    forEachLine(t.bytes, (line) => {
      const event = JSON.parse(line) as { type?: unknown };
      if (typeof event.type === 'string') events += 1;
    }),
  );
  if (events !== t.lines) throw new BenchFailure(`baseline: ${events} events parsed, expected ${t.lines}`);
  return timing;
}

// ---------------------------------------------------------------- correctness

/** The mapper's output must add up to what was generated. */
function verify(t: PiTranscript): void {
  const texts: string[] = [];
  const thoughts: string[] = [];
  const counts = new Map<string, number>();
  let terminal: CliMessage | undefined;
  normalize(t.bytes, (message) => {
    counts.set(message.type, (counts.get(message.type) ?? 0) + 1);
    if (message.type === 'assistant') texts.push(message.content.text);
    else if (message.type === 'assistant.thought') thoughts.push(message.content.text);
    else if (message.type === 'terminal.completed' || message.type === 'terminal.failed') terminal = message;
  });
  const problems: string[] = [];
  const text = texts.join('');
  if (text !== t.text) problems.push(`assistant text differs: ${firstDifference(text, t.text)}`);
  if (thoughts.length !== t.thoughts.length || thoughts.some((x, i) => x !== t.thoughts[i])) {
    problems.push(
      `assistant.thought: got ${thoughts.length}, expected ${t.thoughts.length}; first difference at #${thoughts.findIndex((x, i) => x !== t.thoughts[i])}`,
    );
  }
  const count = (type: string): number => counts.get(type) ?? 0;
  if (count('tool.call') !== t.toolCalls) problems.push(`tool.call: ${count('tool.call')}, expected ${t.toolCalls}`);
  if (count('tool.failed') !== t.failedToolCalls)
    problems.push(`tool.failed: ${count('tool.failed')}, expected ${t.failedToolCalls}`);
  if (count('tool.completed') !== t.toolCalls - t.failedToolCalls)
    problems.push(`tool.completed: ${count('tool.completed')}, expected ${t.toolCalls - t.failedToolCalls}`);
  if (count('session.started') !== 1) problems.push(`session.started: ${count('session.started')}, expected 1`);
  if (terminal?.type !== 'terminal.completed') problems.push(`terminal: ${JSON.stringify(terminal)}`);
  if (problems.length > 0) {
    throw new BenchFailure(
      `PiMapper output does not match the generated ${mb(t.bytes.length).toFixed(1)} MB transcript:\n  ${problems.join('\n  ')}`,
    );
  }
}

function firstDifference(got: string, expected: string): string {
  let i = 0;
  while (i < got.length && i < expected.length && got.charCodeAt(i) === expected.charCodeAt(i)) i += 1;
  const around = (s: string): string => JSON.stringify(s.slice(Math.max(0, i - 30), i + 30));
  return `${got.length} chars vs ${expected.length} expected, first difference at ${i}: got ${around(got)}, expected ${around(expected)}`;
}

function describe(t: PiTranscript): string {
  const n = (x: number): string => x.toLocaleString('en-US');
  return (
    `${mb(t.bytes.length).toFixed(1)} MB: ${n(t.lines)} lines, ${t.turns} turns, ${n(t.text.length)} assistant text chars, ` +
    `${t.thoughts.length} thinking block${t.thoughts.length === 1 ? '' : 's'}, ${t.toolCalls} tool calls (${t.failedToolCalls} failing), longest message ${n(t.longestMessageChars)} chars`
  );
}
