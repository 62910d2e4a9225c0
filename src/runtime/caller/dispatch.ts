import { promoteActivations } from '../limits/wake.ts';
import { InputError } from '../../errors.ts';
import type { FleetLimitView } from './types.ts';
import { type CallerParts } from './parts.ts';

// Dispatch: pausing and resuming attempt starts, fleet-wide or under one fleet limit, and the fleet limits' status.

/** Stops starting attempts fleet-wide (no `limit`) or under one limit: running turns finish, cancels still work. */
export async function pauseDispatch(parts: CallerParts, limit?: string): Promise<{ paused: string[] }> {
  checkLimitName(parts, limit);
  await parts.fleetLimits.pause(limit);
  await parts.bus.publish({ sessionId: '*', kind: 'dispatch' });
  return { paused: await parts.fleetLimits.paused() };
}

/** Starts attempts again (fleet-wide or under one limit); the sessions waiting for it are woken in order. */
export async function resumeDispatch(parts: CallerParts, limit?: string): Promise<{ paused: string[]; woken: number }> {
  checkLimitName(parts, limit);
  await parts.fleetLimits.resume(limit);
  await parts.bus.publish({ sessionId: '*', kind: 'dispatch' });
  const woken = await promoteActivations(parts.store, parts.queue, await parts.fleetLimits.wakeable());
  return { paused: await parts.fleetLimits.paused(), woken };
}

function checkLimitName(parts: CallerParts, limit: string | undefined): void {
  if (limit === undefined) return;
  if (!parts.fleetLimits.rules.some((r) => r.name === limit)) {
    const names = parts.fleetLimits.rules.map((r) => r.name);
    throw new InputError([
      {
        field: 'limit',
        message: `no limit is named ${JSON.stringify(limit)} (${names.length === 0 ? 'this deployment has no limits' : `limits: ${names.join(', ')}`})`,
      },
    ]);
  }
}

/** Every configured limit with what is held and waiting under it now, and whether dispatch is paused. */
export async function limitsView(parts: CallerParts): Promise<{ paused: boolean; limits: FleetLimitView[] }> {
  const [status, paused] = await Promise.all([parts.fleetLimits.status(), parts.fleetLimits.paused()]);
  const limits = parts.fleetLimits.rules.map((rule): FleetLimitView => {
    const keys = status.filter((s) => s.name === rule.name);
    return {
      name: rule.name,
      match: rule.match,
      maxConcurrent: rule.maxConcurrent === 0 ? null : rule.maxConcurrent,
      maxStartsPerMinute: rule.maxStartsPerMinute === 0 ? null : rule.maxStartsPerMinute,
      maxTokensPerMinute: rule.maxTokensPerMinute === 0 ? null : rule.maxTokensPerMinute,
      paused: paused.includes('*') || paused.includes(rule.name),
      inUse: keys.reduce((n, k) => n + k.inUse, 0),
      waiting: keys.reduce((n, k) => n + k.waiting, 0),
      keys,
    };
  });
  return { paused: paused.includes('*'), limits };
}
