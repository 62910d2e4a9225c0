import { Agent, createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { openAttemptEgress, PLACEHOLDER_KEY } from '../src/process/egress/index.ts';
import { openHostBridges } from '../src/process/sandbox/host-bridges.ts';
import { BenchFailure } from './support/benchmark.ts';
import { median, round } from './support/timing.ts';

/**
 * `npm run bench -- egress`: what the model bridge adds to one model request. The same POST
 * (4 KiB body, 16 KiB answer, keep-alive client) to a loopback model server, directly and through
 * an attempt's egress as an agent without a sandbox reaches it (a loopback relay to the bridge's
 * Unix socket, the bridge swapping the key, a kept connection to the model host). Last line
 * `{"bench":"egress","directMedianMs":…,"bridgedMedianMs":…,"addedMedianMs":…,"ratio":…}`.
 * A real model request takes 0.3–30 s; the figure to compare with that is `addedMedianMs`.
 */
export const name = 'egress';

const REQUESTS = Number(process.env.BENCH_EGRESS_REQUESTS ?? 400);
const BODY = 'x'.repeat(4096);
const ANSWER = 'y'.repeat(16_384);

async function modelServer(): Promise<{ server: Server; url: string; keys: Set<string> }> {
  const keys = new Set<string>();
  const server = createServer((req, res) => {
    keys.add(String(req.headers.authorization));
    req.resume();
    req.on('end', () => res.end(ANSWER));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, keys };
}

async function post(agent: Agent, url: string, key: string): Promise<number> {
  const started = process.hrtime.bigint();
  await new Promise<void>((resolve, reject) => {
    const req = request(
      `${url}/v1/chat/completions`,
      { method: 'POST', agent, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' } },
      (res) => {
        res.resume();
        res.on('end', resolve);
      },
    );
    req.on('error', reject);
    req.end(BODY);
  });
  return Number(process.hrtime.bigint() - started) / 1e6;
}

export async function run(log: (line: string) => void = console.log): Promise<Record<string, unknown>> {
  const model = await modelServer();
  const egress = await openAttemptEgress(
    { sessionId: 'bench', allow: [] },
    { baseUrl: new URL(`${model.url}/v1`), key: 'sk-bench-real' },
  );
  const bridges = await openHostBridges(egress.bridges);
  const reached = egress.reached(bridges.urls);
  const bridged = (reached.modelBaseUrl ?? '').replace(/\/v1$/, '');
  const agent = new Agent({ keepAlive: true });
  try {
    // Warm both paths, then alternate so that drift hits both alike.
    for (let i = 0; i < 20; i++) {
      await post(agent, model.url, 'sk-bench-real');
      await post(agent, bridged, PLACEHOLDER_KEY);
    }
    const direct: number[] = [];
    const viaBridge: number[] = [];
    for (let i = 0; i < REQUESTS; i++) {
      direct.push(await post(agent, model.url, 'sk-bench-real'));
      viaBridge.push(await post(agent, bridged, PLACEHOLDER_KEY));
    }
    if ([...model.keys].some((k) => k !== 'Bearer sk-bench-real'))
      throw new BenchFailure(`the model server saw another key: ${[...model.keys].join(', ')}`);
    const d = median(direct);
    const b = median(viaBridge);
    log(
      `model request (4 KiB up, 16 KiB down), median of ${REQUESTS}: direct ${d.toFixed(3)} ms, through the egress bridge ${b.toFixed(3)} ms (+${(b - d).toFixed(3)} ms)`,
    );
    return {
      bench: name,
      requests: REQUESTS,
      directMedianMs: round(d, 3),
      bridgedMedianMs: round(b, 3),
      addedMedianMs: round(b - d, 3),
      ratio: round(b / d, 3),
    };
  } finally {
    agent.destroy();
    await bridges.close();
    await egress.close();
    model.server.close();
  }
}
