import { describe, expect, it } from 'vitest';
import { loadConfig, workspaceConfig } from '../../src/config/config.ts';
import {
  ATTEMPT_DEFAULTS,
  HTTP_DEFAULTS,
  LIFECYCLE_DEFAULTS,
  TOKEN_DEFAULTS,
  SHUTDOWN_GRACE_MS,
  SWEEP_INTERVAL_MS,
  WORKER_DEFAULTS,
} from '../../src/config/defaults.ts';
import { PiOptionsSchema } from '../../src/agents/pi/options.ts';

describe('option defaults', () => {
  it('a configuration that sets nothing gets the defaults of src/config/defaults.ts', () => {
    const config = loadConfig({}, {});
    expect(config.worker).toMatchObject({
      concurrency: WORKER_DEFAULTS.concurrency,
      leaseTtl: WORKER_DEFAULTS.leaseTtlMs,
      stalledInterval: WORKER_DEFAULTS.stalledIntervalMs,
      holdBackoff: WORKER_DEFAULTS.holdBackoffMs,
      poll: WORKER_DEFAULTS.pollMs,
      heartbeat: WORKER_DEFAULTS.heartbeatMs,
      shutdownGrace: SHUTDOWN_GRACE_MS,
      attemptPidsMax: ATTEMPT_DEFAULTS.pidsMax,
      attemptMemoryMaxMb: ATTEMPT_DEFAULTS.memoryMaxMb,
    });
    expect(config.pi.idleTimeout).toBe(ATTEMPT_DEFAULTS.idleTimeoutMs);
    expect(config.lifecycle).toEqual({
      retention: LIFECYCLE_DEFAULTS.retentionMs,
      maxRetention: LIFECYCLE_DEFAULTS.maxRetentionMs,
      maxQueuedPrompts: LIFECYCLE_DEFAULTS.maxQueuedPrompts,
      maxLogMessages: LIFECYCLE_DEFAULTS.maxLogMessages,
      maxArchiveBytes: LIFECYCLE_DEFAULTS.maxArchiveBytes,
      maxArchiveLineBytes: LIFECYCLE_DEFAULTS.maxArchiveLineBytes,
      maxLogBytes: LIFECYCLE_DEFAULTS.maxLogBytes,
      sweepInterval: SWEEP_INTERVAL_MS,
    });
    expect(config.caller).toEqual({ tenant: TOKEN_DEFAULTS.localTenant, maxPriority: TOKEN_DEFAULTS.localMaxPriority });
    expect(config.http).toMatchObject({
      host: HTTP_DEFAULTS.host,
      port: HTTP_DEFAULTS.port,
      bodyLimitBytes: HTTP_DEFAULTS.bodyLimitBytes,
      maxStreams: HTTP_DEFAULTS.maxStreams,
    });
  });

  it('are the values the README documents', () => {
    expect(WORKER_DEFAULTS).toEqual({
      concurrency: 4,
      leaseTtlMs: 2_000,
      stalledIntervalMs: 500,
      holdBackoffMs: 2_000,
      pollMs: 1_000,
      heartbeatMs: 5_000,
    });
    expect(SHUTDOWN_GRACE_MS).toBe(10_000);
    expect(ATTEMPT_DEFAULTS.idleTimeoutMs).toBe(600_000);
    expect(HTTP_DEFAULTS.host).toBe('127.0.0.1');
  });

  it('workspaces are on by default, under the state dir; SESSIOND_WORKSPACES_ENABLED=false turns them off', () => {
    expect(workspaceConfig(loadConfig({}, { SESSIOND_STATE_DIR: '/var/lib/sessiond' }))).toEqual({
      root: '/var/lib/sessiond/workspaces',
      gitDir: '/var/lib/sessiond/workspace-git',
      store: '/var/lib/sessiond/workspace-store.git',
      exclude: ['.env*', '*.pem', 'id_*'],
      maxBytes: 1024 * 1024 * 1024,
      maxSnapshots: 10_000,
    });
    for (const off of ['false', '0'])
      expect(workspaceConfig(loadConfig({}, { SESSIOND_WORKSPACES_ENABLED: off }))).toBeNull();
    expect(workspaceConfig(loadConfig({ workspaces: { enabled: false } }, {}))).toBeNull();
  });

  it('an agent run without an idle timeout gets the default one', () => {
    expect(PiOptionsSchema.parse({ prompt: 'hi' }).idleTimeoutMs).toBe(ATTEMPT_DEFAULTS.idleTimeoutMs);
  });
});
