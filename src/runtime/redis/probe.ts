import net from 'node:net';

/**
 * A dependency-free Redis probe: opens one TCP connection, sends a few commands in RESP, reads the
 * replies, closes. Used to find out whether something answers PING on a port (before any ioredis
 * client exists, and without ioredis' reconnect loop) and by the test helper's readiness wait.
 * Never throws; a password sent with AUTH never appears in a result.
 */

export type RespReply =
  | { kind: 'simple'; value: string }
  | { kind: 'error'; value: string }
  | { kind: 'integer'; value: number }
  | { kind: 'bulk'; value: string }
  | { kind: 'nil' };

export type SendResult =
  | { ok: true; replies: RespReply[] }
  | { ok: false; reason: 'refused' | 'timeout' | 'closed' | 'not-redis' | 'error'; detail: string };

export interface ProbeTarget {
  host?: string;
  port: number;
  timeoutMs?: number;
}

const DEFAULT_PROBE_TIMEOUT_MS = 1000;

function encodeCommand(args: readonly string[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const arg of args) {
    const bytes = Buffer.from(arg, 'utf8');
    parts.push(Buffer.from(`$${bytes.length}\r\n`), bytes, Buffer.from('\r\n'));
  }
  return Buffer.concat(parts);
}

type Parsed = { reply: RespReply; next: number } | 'incomplete' | 'invalid';

/** Parses one RESP2 reply (simple string, error, integer, bulk string) at `offset`. */
function parseReply(buf: Buffer, offset: number): Parsed {
  if (offset >= buf.length) return 'incomplete';
  const lineEnd = buf.indexOf('\r\n', offset);
  if (lineEnd === -1) return buf.length - offset > 64 * 1024 ? 'invalid' : 'incomplete';
  const type = String.fromCharCode(buf[offset] ?? 0);
  const line = buf.toString('utf8', offset + 1, lineEnd);
  switch (type) {
    case '+':
      return { reply: { kind: 'simple', value: line }, next: lineEnd + 2 };
    case '-':
      return { reply: { kind: 'error', value: line }, next: lineEnd + 2 };
    case ':': {
      if (!/^-?\d+$/.test(line)) return 'invalid';
      return { reply: { kind: 'integer', value: Number(line) }, next: lineEnd + 2 };
    }
    case '$': {
      if (line === '-1') return { reply: { kind: 'nil' }, next: lineEnd + 2 };
      if (!/^\d+$/.test(line)) return 'invalid';
      const length = Number(line);
      const start = lineEnd + 2;
      if (buf.length < start + length + 2) return 'incomplete';
      return { reply: { kind: 'bulk', value: buf.toString('utf8', start, start + length) }, next: start + length + 2 };
    }
    default:
      return 'invalid';
  }
}

/** Sends `commands` (pipelined) and resolves with one reply per command. */
export function sendCommands(target: ProbeTarget, commands: readonly (readonly string[])[]): Promise<SendResult> {
  const host = target.host ?? '127.0.0.1';
  const timeoutMs = target.timeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS;
  return new Promise((resolve) => {
    let settled = false;
    let buffer = Buffer.alloc(0);
    const socket = net.connect({ host, port: target.port });
    const finish = (result: SendResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(result);
    };
    const timer = setTimeout(
      () =>
        finish({
          ok: false,
          reason: 'timeout',
          detail: `no answer from ${host}:${target.port} within ${timeoutMs} ms`,
        }),
      timeoutMs,
    );
    socket.on('connect', () => {
      socket.write(Buffer.concat(commands.map(encodeCommand)));
    });
    socket.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      const replies: RespReply[] = [];
      let offset = 0;
      while (replies.length < commands.length) {
        const parsed = parseReply(buffer, offset);
        if (parsed === 'incomplete') return;
        if (parsed === 'invalid') {
          finish({
            ok: false,
            reason: 'not-redis',
            detail: `${host}:${target.port} answered something that is not Redis`,
          });
          return;
        }
        replies.push(parsed.reply);
        offset = parsed.next;
      }
      finish({ ok: true, replies });
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ECONNREFUSED')
        finish({ ok: false, reason: 'refused', detail: `nothing listens on ${host}:${target.port}` });
      else finish({ ok: false, reason: 'error', detail: `${host}:${target.port}: ${err.code ?? err.message}` });
    });
    socket.on('close', () =>
      finish({ ok: false, reason: 'closed', detail: `${host}:${target.port} closed the connection` }),
    );
  });
}

export type PingResult =
  | { status: 'pong' }
  | {
      status: 'auth-required' | 'auth-failed' | 'loading' | 'not-redis' | 'refused' | 'timeout' | 'error';
      detail: string;
    };

/** PING (after AUTH when a password is given): does a usable Redis answer on host:port? */
export async function pingRedis(target: ProbeTarget & { password?: string }): Promise<PingResult> {
  const commands: string[][] =
    target.password !== undefined && target.password !== '' ? [['AUTH', target.password], ['PING']] : [['PING']];
  const result = await sendCommands(target, commands);
  if (!result.ok) {
    if (result.reason === 'closed') return { status: 'error', detail: result.detail };
    return { status: result.reason, detail: result.detail };
  }
  const auth = commands.length === 2 ? result.replies[0] : undefined;
  const ping = result.replies[result.replies.length - 1];
  if (ping?.kind === 'simple' && ping.value === 'PONG') return { status: 'pong' };
  if (ping?.kind === 'error') {
    if (/^LOADING/.test(ping.value)) return { status: 'loading', detail: ping.value };
    if (auth?.kind === 'error' && /WRONGPASS|invalid password|invalid username-password/i.test(auth.value))
      return { status: 'auth-failed', detail: auth.value };
    if (/^NOAUTH/.test(ping.value)) return { status: 'auth-required', detail: ping.value };
    return { status: 'error', detail: ping.value };
  }
  return { status: 'not-redis', detail: 'unexpected reply to PING' };
}

/** `INFO server` as a field map (redis_version, process_id, tcp_port, …), or null. */
export async function redisServerInfo(
  target: ProbeTarget & { password?: string },
): Promise<Record<string, string> | null> {
  const commands: string[][] =
    target.password !== undefined && target.password !== ''
      ? [
          ['AUTH', target.password],
          ['INFO', 'server'],
        ]
      : [['INFO', 'server']];
  const result = await sendCommands(target, commands);
  if (!result.ok) return null;
  const info = result.replies[result.replies.length - 1];
  if (info?.kind !== 'bulk') return null;
  const fields: Record<string, string> = {};
  for (const line of info.value.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0 && !line.startsWith('#')) fields[line.slice(0, colon)] = line.slice(colon + 1);
  }
  return fields;
}
