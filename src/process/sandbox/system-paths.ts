import { existsSync, lstatSync, readlinkSync, realpathSync } from 'node:fs';
import { dirname, sep } from 'node:path';
import { etcViewBinds } from './etc-view.ts';

/** The system dirs an agent sees read-only (a merged-/usr symlink such as /bin -> usr/bin stays a symlink). */
export const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32', '/opt'];

/**
 * What of /etc an agent sees: name resolution, TLS roots, the dynamic linker, users and groups,
 * locale and time zone. Not the rest (/etc/shadow, sessiond's or other services' config).
 */
export const ETC_ENTRIES = [
  'alternatives',
  'ssl',
  'ca-certificates',
  'ca-certificates.conf',
  'pki',
  'crypto-policies',
  'ld.so.cache',
  'ld.so.conf',
  'ld.so.conf.d',
  'passwd',
  'group',
  'nsswitch.conf',
  'hosts',
  'host.conf',
  'resolv.conf',
  'localtime',
  'timezone',
  'os-release',
  'debian_version',
  'gitconfig',
  'mime.types',
  'protocols',
  'services',
  'terminfo',
  'profile',
  'bash.bashrc',
  'inputrc',
  'shells',
];

/** Every system path an agent reads: SYSTEM_DIRS and ETC_ENTRIES that exist here. */
export function systemPaths(): string[] {
  return [...SYSTEM_DIRS, ...ETC_ENTRIES.map((e) => `/etc/${e}`)].filter((p) => existsSync(p) || isSymlink(p));
}

/** SYSTEM_DIRS that exist here. */
function systemDirs(): string[] {
  return SYSTEM_DIRS.filter((p) => existsSync(p) || isSymlink(p));
}

/**
 * bwrap arguments that show the system read-only: SYSTEM_DIRS (a top-level symlink as a symlink), and
 * ETC_ENTRIES through the /etc view (one bind of copies of its files, see etc-view.ts) — or, with
 * `etcView: false` (a sandbox that binds something else under /etc, which needs a mount point the
 * read-only view cannot get), one read-only bind per entry.
 */
export function systemBinds(options: { etcView?: boolean } = {}): string[][] {
  const dirs = systemDirs().map((path) =>
    isSymlink(path) && path.split(sep).length === 2
      ? ['--symlink', readlinkSync(path), path]
      : ['--ro-bind', path, path],
  );
  if (options.etcView !== false) return [...dirs, ...etcViewBinds(ETC_ENTRIES, isSystemPath)];
  const etc = ETC_ENTRIES.map((e) => `/etc/${e}`).filter((p) => existsSync(p));
  return [...dirs, ...etc.map((path) => ['--ro-bind', path, path])];
}

function isSymlink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    // A path that does not exist is not a link.
    return false;
  }
}

/** Whether `path` lies under one of SYSTEM_DIRS (visible anyway). */
export function isSystemPath(path: string): boolean {
  return SYSTEM_DIRS.some((dir) => path === dir || path.startsWith(`${dir}/`));
}

/**
 * What an agent's command needs to run: the command's own path, and its install root (the top-most
 * node_modules above its real path, else its directory); the same for the Node running sessiond
 * (a `#!/usr/bin/env node` script finds it on PATH). Paths under SYSTEM_DIRS are left out.
 */
export function commandPaths(command: string): string[] {
  const out = new Set<string>();
  for (const path of [command, process.execPath]) {
    if (!path.startsWith('/')) continue;
    let real: string;
    try {
      real = realpathSync(path);
    } catch {
      // A path that does not exist has nothing to bind.
      continue;
    }
    for (const p of [path, real]) {
      const at = p.indexOf(`${sep}node_modules${sep}`);
      out.add(at === -1 ? dirname(p) : p.slice(0, at + `${sep}node_modules`.length));
    }
  }
  return [...out].filter((p) => !isSystemPath(p) && p !== '/');
}
