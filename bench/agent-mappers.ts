import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AGENT_NAMES, agentDefinition, type AgentName } from '../src/agents/registry.ts';
import type { AttemptExit } from '../src/agents/shared/agent-mapper.ts';
import { LineSplitter } from '../src/process/split-lines.ts';
import { BenchFailure } from './support/benchmark.ts';
import { mb, round, time } from './support/timing.ts';

/**
 * Every other agent's mapper against its own baseline (split the same bytes on
 * '\n' and JSON.parse each line), on that agent's recorded runs (test/fixtures/<agent>)
 * repeated until the input holds at least MIN_BYTES. Each recorded run goes
 * through a fresh mapper, as each attempt does.
 */
const FIXTURES = join(import.meta.dirname, '..', 'test', 'fixtures');
const MIN_BYTES = 8e6;
const REPETITIONS = 5;
const CLEAN_EXIT: AttemptExit = { exitCode: 0, signal: null, stopReason: null, stderrTail: '' };

export interface AgentMapperFigure {
  mbPerSec: number;
  baselineMbPerSec: number;
  ratio: number;
}

function corpus(agent: string): Buffer[] {
  const dir = join(FIXTURES, agent);
  const runs = readdirSync(dir)
    .filter((f) => f.endsWith('.stdout.jsonl'))
    .sort()
    .map((f) => readFileSync(join(dir, f)));
  if (runs.length === 0) throw new BenchFailure(`no recordings in ${dir}`);
  const out: Buffer[] = [];
  let bytes = 0;
  while (bytes < MIN_BYTES) {
    for (const run of runs) {
      out.push(run);
      bytes += run.length;
    }
  }
  return out;
}

function eachLine(bytes: Buffer, onLine: (line: string) => void): void {
  const splitter = new LineSplitter();
  for (const line of splitter.push(bytes)) onLine(line);
  const rest = splitter.flush();
  if (rest !== undefined) onLine(rest);
}

export function measureAgentMappers(log: (line: string) => void): Record<string, AgentMapperFigure> {
  const figures: Record<string, AgentMapperFigure> = {};
  const others = AGENT_NAMES.filter((n) => n !== 'pi');
  log(
    `  other agents' mappers vs their own split + JSON.parse, on their recorded runs repeated to ≥ ${MIN_BYTES / 1e6} MB (best of ${REPETITIONS}):`,
  );
  for (const agent of others) {
    const runs = corpus(agent);
    const size = mb(runs.reduce((n, b) => n + b.length, 0));
    const definition = agentDefinition(agent as AgentName);
    let terminals = 0;
    const mapperPass = (): void => {
      terminals = 0;
      for (const run of runs) {
        const mapper = definition.createMapper({});
        eachLine(run, (line) => void mapper.push(line));
        terminals += mapper.complete(CLEAN_EXIT).length > 0 ? 1 : 0;
      }
    };
    const baselinePass = (): void => {
      for (const run of runs) {
        eachLine(run, (line) => {
          try {
            JSON.parse(line);
          } catch {
            // the recordings hold a few non-JSON lines on purpose
          }
        });
      }
    };
    mapperPass();
    baselinePass();
    if (terminals !== runs.length)
      throw new BenchFailure(`${agent}: ${terminals} runs ended with a terminal message, expected ${runs.length}`);
    const mapperMs: number[] = [];
    const baselineMs: number[] = [];
    for (let i = 0; i < REPETITIONS; i += 1) {
      mapperMs.push(time(mapperPass).wallMs);
      baselineMs.push(time(baselinePass).wallMs);
    }
    const mbPerSec = size / (Math.min(...mapperMs) / 1000);
    const baselineMbPerSec = size / (Math.min(...baselineMs) / 1000);
    figures[agent] = {
      mbPerSec: round(mbPerSec, 1),
      baselineMbPerSec: round(baselineMbPerSec, 1),
      ratio: round(mbPerSec / baselineMbPerSec, 3),
    };
    log(
      `    ${agent.padEnd(12)} ${size.toFixed(1)} MB: mapper ${mbPerSec.toFixed(1)} MB/s, baseline ${baselineMbPerSec.toFixed(1)} MB/s, ratio ${(mbPerSec / baselineMbPerSec).toFixed(3)}`,
    );
  }
  return figures;
}
