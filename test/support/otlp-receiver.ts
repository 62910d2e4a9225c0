import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';

/**
 * An OTLP/HTTP trace receiver on 127.0.0.1 for tests: accepts `POST /v1/traces` with the JSON
 * encoding (what @opentelemetry/exporter-trace-otlp-http sends), answers 200 `{}`, and keeps the
 * spans flattened. Anything else (protobuf, another path) is answered 415/404 and recorded as refused.
 */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  startMs: number;
  endMs: number;
  attributes: Record<string, string | number | boolean>;
  links: Array<{ traceId: string; spanId: string }>;
  status: { code?: number; message?: string };
  service: string;
}

export interface OtlpReceiver {
  /** The base URL, for OTEL_EXPORTER_OTLP_ENDPOINT (the exporter appends /v1/traces). */
  url: string;
  spans(): ReceivedSpan[];
  refused(): string[];
  close(): Promise<void>;
}

type AnyValue = { stringValue?: string; intValue?: string | number; doubleValue?: number; boolValue?: boolean };
type KeyValue = { key: string; value: AnyValue };

function value(v: AnyValue): string | number | boolean {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  return '';
}

function attributes(list: KeyValue[] | undefined): Record<string, string | number | boolean> {
  return Object.fromEntries((list ?? []).map((kv) => [kv.key, value(kv.value)]));
}

function ms(nanos: string | number | undefined): number {
  return nanos === undefined ? 0 : Number(BigInt(String(nanos)) / 1_000_000n);
}

async function body(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks);
  return req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const refused: string[] = [];
  const server = createServer((req, res) => {
    void (async () => {
      const data = await body(req);
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        refused.push(`${req.method} ${req.url}`);
        res.writeHead(404).end();
        return;
      }
      if (!String(req.headers['content-type'] ?? '').includes('json')) {
        refused.push(`content-type ${req.headers['content-type']}`);
        res.writeHead(415).end();
        return;
      }
      const request = JSON.parse(data.toString('utf8')) as {
        resourceSpans?: Array<{
          resource?: { attributes?: KeyValue[] };
          scopeSpans?: Array<{ spans?: Array<Record<string, unknown>> }>;
        }>;
      };
      for (const rs of request.resourceSpans ?? []) {
        const service = String(attributes(rs.resource?.attributes)['service.name'] ?? '');
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            spans.push({
              traceId: String(s.traceId),
              spanId: String(s.spanId),
              parentSpanId: String(s.parentSpanId ?? ''),
              name: String(s.name),
              startMs: ms(s.startTimeUnixNano as string),
              endMs: ms(s.endTimeUnixNano as string),
              attributes: attributes(s.attributes as KeyValue[]),
              links: ((s.links as Array<{ traceId: string; spanId: string }> | undefined) ?? []).map((l) => ({
                traceId: String(l.traceId),
                spanId: String(l.spanId),
              })),
              status: (s.status as { code?: number; message?: string } | undefined) ?? {},
              service,
            });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    })().catch(() => res.writeHead(400).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans: () => [...spans],
    refused: () => [...refused],
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
