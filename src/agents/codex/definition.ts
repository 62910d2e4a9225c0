import { z } from 'zod';
import { callerOptions } from '../shared/caller-options.ts';
import { CODEX_SANDBOX_MODES } from './options.ts';
import type { AgentDefinition } from '../agent-definition.ts';
import { defineAgentDefinition } from '../shared/define-agent.ts';
import { agentEnv } from '../shared/agent-env.ts';
import { managedCodexHomePath, userCodexHome } from './home.ts';
import { CodexMapper } from './mapper.ts';
import type { CodexOptionsInput } from './options.ts';
import { runCodex } from './provider.ts';
import {
  checkCodexState,
  codexStateAfterTool,
  exportCodexRollout,
  importCodexRollout,
  type CodexRolloutState,
} from './session-file.ts';
import { sessiondStateDir } from '../shared/managed-files.ts';

/** The managed CODEX_HOME these options run in (where the thread rollouts are). */
function managedHome(options: Readonly<Record<string, unknown>>): string {
  const extra = options.env !== null && typeof options.env === 'object' ? (options.env as Record<string, string>) : {};
  const env = agentEnv(extra);
  return managedCodexHomePath(
    userCodexHome(typeof options.codexHome === 'string' ? options.codexHome : undefined, env),
    sessiondStateDir(env),
  );
}

/**
 * Codex behind the shared contract. A session resumes its Codex thread with `codex exec resume <thread
 * id>`; the thread's rollout file is the state that travels with the session between hosts.
 */
export const codex: AgentDefinition = defineAgentDefinition<CodexOptionsInput>({
  callerOptions: callerOptions({
    model: z.string().min(1).max(200).optional(),
    provider: z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be a provider id')
      .optional(),
    sandbox: z.enum(CODEX_SANDBOX_MODES).optional(),
  }),
  permissions: {
    ladder: {
      option: 'sandbox',
      steps: CODEX_SANDBOX_MODES,
      defaultStep: 'read-only',
      defaultCeiling: 'workspace-write',
    },
  },
  run: (request, context) =>
    runCodex(
      {
        ...request.options,
        prompt: request.text,
        session: request.resumeSessionId === null ? { mode: 'new' } : { mode: 'resume', id: request.resumeSessionId },
      },
      context,
    ),
  createMapper: (options) => new CodexMapper(options),
  async exportState(options, agentSessionId) {
    const state = await exportCodexRollout(managedHome(options), agentSessionId);
    return state === null ? null : JSON.stringify(state);
  },
  checkState: (state, agentSessionId) => void checkCodexState(state, agentSessionId),
  async importState(options, agentSessionId, state, how) {
    const rollout = JSON.parse(state) as CodexRolloutState;
    await importCodexRollout(managedHome(options), agentSessionId, rollout, how?.exact === true);
  },
  // `codex exec --json` item ids are not the rollout's call ids: the cut finds the run's k-th tool item instead.
  stateAfterTool(state, _toolCallId, run) {
    const cut = codexStateAfterTool(JSON.parse(state) as CodexRolloutState, run.toolCallsEnded);
    return cut === null ? null : { state: JSON.stringify(cut.state), later: cut.later };
  },
});
