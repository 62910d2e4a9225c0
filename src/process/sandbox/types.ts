/** How an attempt's agent is confined (see docs/sandbox.md). */
export type SandboxMode = 'bwrap' | 'landlock' | 'none';

/** What `SESSIOND_SANDBOX` may ask for. */
export type SandboxSetting = 'auto' | SandboxMode;

/** This host's sandbox, decided once per process (detect.ts). */
export interface SandboxInfo {
  /** What SESSIOND_SANDBOX asked for (default 'auto'). */
  requested: SandboxSetting;
  /** The mode every attempt of this process runs in. */
  mode: SandboxMode;
  /** Why this mode: what was probed, what was missing. */
  detail: string;
  /** What this mode cannot give, in plain sentences (empty for bwrap). */
  gaps: string[];
  /** Set when the mode asked for cannot be had here: every attempt is refused with this reason. */
  refused: string | null;
}

/**
 * A host Unix socket the attempt may reach over TCP (e.g. the egress proxy of this attempt).
 * Contract: the sandbox makes `socket` reachable from inside the attempt as `http://127.0.0.1:<port>`
 * and hands the spawner the URL under `name` before the agent's argv and env are final (see
 * `SpawnSpec.finalize`). In bwrap mode the attempt's network namespace holds only `lo`: the
 * sandbox's init listens on the port and relays each connection to the socket, bound into the
 * sandbox; in landlock and none modes a listener on the worker's 127.0.0.1 (an ephemeral port) relays
 * to the socket, and in landlock mode those ports are the only TCP ports `connect` may reach. The
 * bridge lives as long as the attempt's process; names are unique per attempt.
 */
export interface Bridge {
  name: string;
  socket: string;
}

/** Files of the agent (its config dir, its session files) the sandbox lets it see, besides its cwd. */
export interface SandboxFiles {
  /** Visible read-only (a dir with its content; a symlink in it leads nowhere unless its target is listed too). */
  readOnly?: readonly string[];
  /** Visible read-write (made when missing). */
  writable?: readonly string[];
}

/** What spawnAgent needs to confine one attempt. */
export interface SandboxRequest extends SandboxFiles {
  /** The mode to use; default this host's (detectSandbox()). */
  mode?: SandboxMode;
  /** The deployment policy requires a sandbox: mode 'none' refuses the attempt. */
  required?: boolean;
}
