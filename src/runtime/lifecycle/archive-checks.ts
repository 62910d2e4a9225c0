import { agentDefinition, isAgentName } from '../../agents/registry.ts';
import { shown } from '../../agents/shared/state-check.ts';
import { LIFECYCLE_DEFAULTS } from '../../config/defaults.ts';
import { SESSION_STATES } from '../../../machines/states.ts';
import { parseRetryPolicy } from '../../retry/policy.ts';

/**
 * What an archive's fields must be beyond their JSON shape (archive.ts): each checked as if a caller
 * sent it, so a hostile archive is refused at import, naming the line and the field, before anything
 * is written — not stored, to fail later on a worker. Pure. Every error message starts with the
 * field at fault (`fields.policy: …`, `field: …`, `value.fileName: …`).
 */

/** An agent session id as the runtime passes it to an agent (a resume argument): never an option, never a path. */
export const AGENT_SESSION_ID = /^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,199}$/;
export const AGENT_SESSION_ID_RULE =
  'must be an agent session id (1-200 letters, digits or _.:-, not starting with - or .)';

/** The size limits of an archive (the operator's `lifecycle.maxArchiveBytes` and `lifecycle.maxArchiveLineBytes`). */
export interface ArchiveLimits {
  /** The whole archive, in bytes (UTF-8). */
  maxArchiveBytes: number;
  /** One line of it (a message, the agent's state…), in bytes (UTF-8). */
  maxArchiveLineBytes: number;
}

/** The configuration's defaults (`lifecycle.maxArchiveBytes`, `lifecycle.maxArchiveLineBytes`). */
export const ARCHIVE_LIMITS: ArchiveLimits = {
  maxArchiveBytes: LIFECYCLE_DEFAULTS.maxArchiveBytes,
  maxArchiveLineBytes: LIFECYCLE_DEFAULTS.maxArchiveLineBytes,
};

/** The meta line's fields as the deployment will read them; throws `fields.<name>: …`. Returns the fields with the policy as the schema completes it. */
export function checkMetaFields<T extends Partial<Record<string, string>>>(fields: T): T {
  const out: Partial<Record<string, string>> = { ...fields };
  if (fields.state !== undefined && !(SESSION_STATES as readonly string[]).includes(fields.state))
    throw new Error(`fields.state: must be one of ${SESSION_STATES.join(', ')} (got ${shown(fields.state)})`);
  if (fields.retention !== undefined && !/^\d{1,16}$/.test(fields.retention))
    throw new Error(`fields.retention: must be a number of milliseconds (got ${shown(fields.retention)})`);
  if (fields.options !== undefined) {
    const options = json(fields.options, 'fields.options');
    if (options === null || typeof options !== 'object' || Array.isArray(options))
      throw new Error('fields.options: must be a JSON object');
  }
  if (fields.policy !== undefined) {
    const parsed = parseRetryPolicy(json(fields.policy, 'fields.policy'));
    if (!parsed.ok) throw new Error(`fields.policy: ${parsed.errors.map((e) => e.message).join('; ')}`);
    out.policy = JSON.stringify(parsed.policy);
  }
  return out as T;
}

/** The retry policy inside the machine's snapshot (the one its turns ran under): by the same schema. */
export function checkSnapshotPolicy(policy: unknown): void {
  if (policy === undefined) return;
  const parsed = parseRetryPolicy(policy);
  if (!parsed.ok) throw new Error(`value.snapshot.context.policy: ${parsed.errors.map((e) => e.message).join('; ')}`);
}

function json(text: string, field: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new Error(`${field}: not JSON`);
  }
}

/** An agent line's agent and agent session id (`<agent>:<id>`, `acp:<name>:<id>`). */
export function agentOfField(field: string): { agent: string; id: string } {
  const at = field.startsWith('acp:') ? field.indexOf(':', 4) : field.indexOf(':');
  return { agent: field.slice(0, at), id: field.slice(at + 1) };
}

/**
 * An agent line checked by the agent's own rules: an agent this sessiond knows, an id of its shape,
 * a state that is that agent session's own (its file, under the agent's own folder). `known`: the
 * agent sessions this archive's session had (the snapshot's and those its log started); an agent
 * line of any other does not match the snapshot.
 */
export function checkAgentLine(
  field: string,
  value: string,
  known: ReadonlySet<string>,
  snapshotId: string | null,
): void {
  const { agent, id } = agentOfField(field);
  if (!isAgentName(agent))
    throw new Error(`field: agent ${shown(agent)} is not one this sessiond knows (its state cannot be checked)`);
  if (!AGENT_SESSION_ID.test(id)) throw new Error(`field: ${shown(id)} ${AGENT_SESSION_ID_RULE}`);
  if (!known.has(id))
    throw new Error(
      `field: agent session ${shown(id)} does not match the snapshot: it is neither the snapshot's (context.agentSessionId ${snapshotId === null ? 'null' : shown(snapshotId)}) nor one the session's log started`,
    );
  const definition = agentDefinition(agent);
  if (definition.checkState !== undefined) definition.checkState(value, id);
  else if (definition.importState !== undefined)
    throw new Error(`field: agent ${shown(agent)} cannot check a state it is given (no checkState): refused`);
}
