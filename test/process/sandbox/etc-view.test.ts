import {
  existsSync,
  lstatSync,
  readlinkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { spawnAgent } from '../../../src/process/index.ts';
import { etcViewBinds, resetEtcView } from '../../../src/process/sandbox/etc-view.ts';
import { ETC_ENTRIES, isSystemPath } from '../../../src/process/sandbox/system-paths.ts';
import { collect } from '../../support/processes.ts';

const made: string[] = [];
const cacheBefore = process.env.SESSIOND_SANDBOX_CACHE;

afterEach(() => {
  if (cacheBefore === undefined) delete process.env.SESSIOND_SANDBOX_CACHE;
  else process.env.SESSIOND_SANDBOX_CACHE = cacheBefore;
  resetEtcView();
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function temp(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

async function inSandbox(script: string, sandbox: { readOnly?: string[] } = {}): Promise<string> {
  const result = await spawnAgent({
    command: '/bin/sh',
    args: ['-c', script],
    env: { PATH: '/usr/bin:/bin' },
    sandbox: { mode: 'bwrap', ...sandbox },
  });
  if (!result.ok) throw new Error(result.error);
  const lines = await collect(result.agent.lines());
  const exit = await result.agent.exited;
  await result.agent.stop();
  expect(exit.exitCode, result.agent.stderrTail()).toBe(0);
  return lines.join('\n');
}

describe('the /etc view of bwrap sandboxes', () => {
  it('holds copies of the files, mount points for the directories, and follows every change of the sources', () => {
    process.env.SESSIOND_SANDBOX_CACHE = temp('etc-view-cache-');
    resetEtcView();
    const etc = temp('etc-view-source-');
    const elsewhere = temp('etc-view-target-');
    writeFileSync(join(etc, 'passwd'), 'root:x:0:0::/root:/bin/sh\n');
    writeFileSync(join(elsewhere, 'stub-resolv.conf'), 'nameserver 127.0.0.53\n');
    symlinkSync(join(elsewhere, 'stub-resolv.conf'), join(etc, 'resolv.conf'));
    mkdirSync(join(etc, 'ssl', 'certs'), { recursive: true });
    // A link into the system dirs (visible inside) stays a link: /etc/localtime's text names the time zone.
    symlinkSync('/usr/bin/env', join(etc, 'localtime'));
    const entries = ['passwd', 'resolv.conf', 'ssl', 'hosts', 'localtime'];

    const binds = etcViewBinds(entries, isSystemPath, etc);
    const view = binds[0]?.[1] ?? '';
    expect(binds).toEqual([
      ['--ro-bind', view, '/etc'],
      ['--ro-bind', join(etc, 'ssl'), '/etc/ssl'],
    ]);
    expect(readdirSync(view).sort()).toEqual(['localtime', 'passwd', 'resolv.conf', 'ssl']);
    expect(readlinkSync(join(view, 'localtime'))).toBe('/usr/bin/env');
    expect(readFileSync(join(view, 'passwd'), 'utf8')).toBe('root:x:0:0::/root:/bin/sh\n');
    // A link's target, as a bind of the link showed it.
    expect(readFileSync(join(view, 'resolv.conf'), 'utf8')).toBe('nameserver 127.0.0.53\n');
    expect(readdirSync(join(view, 'ssl'))).toEqual([]);

    // Replaced by rename (as passwd tools do), edited in place, one removed, one added.
    writeFileSync(join(etc, 'passwd.new'), 'root:x:0:0::/root:/bin/sh\nagent:x:1000:1000::/home/agent:/bin/sh\n');
    renameSync(join(etc, 'passwd.new'), join(etc, 'passwd'));
    writeFileSync(join(elsewhere, 'stub-resolv.conf'), 'nameserver 10.0.0.2\nsearch example.test\n');
    rmSync(join(etc, 'ssl'), { recursive: true });
    writeFileSync(join(etc, 'hosts'), '127.0.0.1 localhost\n');
    rmSync(join(etc, 'localtime'));
    symlinkSync('/usr/bin/true', join(etc, 'localtime'));

    expect(etcViewBinds(entries, isSystemPath, etc)).toEqual([['--ro-bind', view, '/etc']]);
    expect(readdirSync(view).sort()).toEqual(['hosts', 'localtime', 'passwd', 'resolv.conf']);
    expect(readlinkSync(join(view, 'localtime'))).toBe('/usr/bin/true');
    expect(readFileSync(join(view, 'passwd'), 'utf8')).toContain('agent:x:1000');
    expect(readFileSync(join(view, 'resolv.conf'), 'utf8')).toBe('nameserver 10.0.0.2\nsearch example.test\n');
    expect(readFileSync(join(view, 'hosts'), 'utf8')).toBe('127.0.0.1 localhost\n');

    // A file turned into a directory (and back) changes kind in the view too.
    rmSync(join(etc, 'hosts'));
    mkdirSync(join(etc, 'hosts'));
    expect(etcViewBinds(entries, isSystemPath, etc)).toEqual([
      ['--ro-bind', view, '/etc'],
      ['--ro-bind', join(etc, 'hosts'), '/etc/hosts'],
    ]);
    expect(readdirSync(join(view, 'hosts'))).toEqual([]);
  });

  it('a view removed under a running worker is made again whole', () => {
    process.env.SESSIOND_SANDBOX_CACHE = temp('etc-view-cache-');
    resetEtcView();
    const etc = temp('etc-view-source-');
    writeFileSync(join(etc, 'group'), 'root:x:0:\n');
    const view = etcViewBinds(['group'], isSystemPath, etc)[0]?.[1] ?? '';
    rmSync(view, { recursive: true });
    expect(etcViewBinds(['group'], isSystemPath, etc)[0]?.[1]).toBe(view);
    expect(readFileSync(join(view, 'group'), 'utf8')).toBe('root:x:0:\n');
  });

  it('inside, /etc shows the listed entries with the host’s content, nothing else, and none can be written', async () => {
    const listed = ETC_ENTRIES.filter((e) => existsSync(`/etc/${e}`));
    const out = await inSandbox(
      'ls -A /etc; echo ---; cat /etc/passwd; echo ---; readlink /etc/localtime; echo ---; ' +
        '{ echo x >> /etc/passwd; } 2>&1; touch /etc/new 2>&1; chmod 666 /etc/passwd 2>&1; true',
    );
    const [names = '', passwd = '', localtime = '', writes = ''] = out.split('\n---\n');
    expect(names.split('\n').sort()).toEqual([...listed].sort());
    expect(passwd).toBe(readFileSync('/etc/passwd', 'utf8').trimEnd());
    // This host's /etc/localtime is a link into /usr/share/zoneinfo: the same link inside.
    expect(lstatSync('/etc/localtime').isSymbolicLink()).toBe(true);
    expect(localtime).toBe(readlinkSync('/etc/localtime'));
    expect(writes.match(/Read-only file system/g)).toHaveLength(3);
  });

  it('a sandbox that binds a path under /etc gets one bind per entry instead (the view has no mount point for it)', async () => {
    const out = await inSandbox('cat /etc/passwd > /dev/null && ls /etc/ssl', {
      readOnly: ['/etc/ssl/certs'],
    });
    expect(out.split('\n')).toContain('certs');
  });
});
