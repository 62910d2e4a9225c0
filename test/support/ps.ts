import { execFileSync } from 'node:child_process';

/** A process as `ps` shows it: what the transcript recorders keep of an agent's process tree. */
export interface Proc {
  pid: number;
  ppid: number;
  pgid: number;
  sid: number;
  stat: string;
  args: string;
}

/** Every process of the host (`ps -eo`), its command line cut to `maxArgs` characters. */
export function psAll(maxArgs = Number.POSITIVE_INFINITY): Proc[] {
  const out = execFileSync('ps', ['-eo', 'pid=,ppid=,pgid=,sid=,stat=,args='], { encoding: 'utf8' });
  const procs: Proc[] = [];
  for (const line of out.split('\n')) {
    const m = /^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(.*)$/.exec(line);
    if (m)
      procs.push({
        pid: Number(m[1]),
        ppid: Number(m[2]),
        pgid: Number(m[3]),
        sid: Number(m[4]),
        stat: m[5] ?? '',
        args: (m[6] ?? '').slice(0, maxArgs),
      });
  }
  return procs;
}

/** `root` (if listed) and its descendants, breadth first. */
export function treeOf(all: readonly Proc[], root: number): Proc[] {
  const out = all.filter((p) => p.pid === root);
  const queue = [root];
  for (let parent = queue.shift(); parent !== undefined; parent = queue.shift()) {
    for (const p of all) {
      if (p.ppid !== parent) continue;
      out.push(p);
      queue.push(p.pid);
    }
  }
  return out;
}

/** Those of `before` still running now (same pid and command line, cut as `before`'s was; not a zombie). */
export function alive(before: readonly Proc[], maxArgs = Number.POSITIVE_INFINITY): Proc[] {
  const now = psAll(maxArgs);
  return before.filter((b) => now.some((n) => n.pid === b.pid && n.args === b.args && !n.stat.startsWith('Z')));
}

/** Live (not zombie) processes whose command line is exactly `sleep N` for one of `durations`: the tools' processes a test planted. */
export function liveSleeps(durations: readonly number[]): Proc[] {
  const wanted = new Set(durations.map((d) => `sleep ${d}`));
  return psAll().filter((p) => !p.stat.startsWith('Z') && wanted.has(p.args.replace(/^\S*\/(sleep)/, '$1')));
}
