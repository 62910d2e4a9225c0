import { z } from 'zod';
import { callerOptions } from '../shared/caller-options.ts';
import { APPROVAL_MODES } from './options.ts';
import type { AgentDefinition } from '../agent-definition.ts';
import { defineAgentDefinition } from '../shared/define-agent.ts';
import { agentEnv } from '../shared/agent-env.ts';
import { managedHomeForOptions } from './home.ts';
import { GeminiMapper } from './mapper.ts';
import type { GeminiOptionsInput } from './options.ts';
import { runGemini } from './provider.ts';
import {
  checkGeminiState,
  exportGeminiSession,
  geminiStateAfterTool,
  importGeminiSession,
  type GeminiSessionState,
} from './session-file.ts';

function envOf(options: Readonly<Record<string, unknown>>): Record<string, string> {
  const raw = options.env;
  const extra: Record<string, string> = {};
  if (raw !== null && typeof raw === 'object' && !Array.isArray(raw)) {
    for (const [key, value] of Object.entries(raw)) if (typeof value === 'string') extra[key] = value;
  }
  return agentEnv(extra);
}

/**
 * The Gemini CLI (0.61) behind the shared contract. Its conversation state is the chat file
 * that `--resume <session id>` reads from the managed gemini home; it travels with the session.
 */
export const gemini: AgentDefinition = defineAgentDefinition<GeminiOptionsInput>({
  callerOptions: callerOptions({
    model: z.string().min(1).max(200).optional(),
    approvalMode: z.enum(APPROVAL_MODES).optional(),
  }),
  permissions: {
    ladder: { option: 'approvalMode', steps: APPROVAL_MODES, defaultStep: 'default', defaultCeiling: 'auto_edit' },
  },
  run: (request, context) =>
    runGemini(
      {
        ...request.options,
        prompt: request.text,
        session: request.resumeSessionId === null ? { mode: 'new' } : { mode: 'resume', id: request.resumeSessionId },
        // `model` comes from the host's options; absent, the provider's own check ends the attempt as a startup failure.
      } as GeminiOptionsInput,
      context,
    ),
  createMapper: (options) => new GeminiMapper(options),
  async exportState(options, agentSessionId) {
    const state = await exportGeminiSession(managedHomeForOptions(options, envOf(options)), agentSessionId);
    return state === null ? null : JSON.stringify(state);
  },
  checkState: (state, agentSessionId) => void checkGeminiState(state, agentSessionId),
  async importState(options, agentSessionId, state, how) {
    const cwd = typeof options.cwd === 'string' ? options.cwd : process.cwd();
    await importGeminiSession(
      managedHomeForOptions(options, envOf(options)),
      checkGeminiState(state, agentSessionId),
      cwd,
      how?.exact === true,
    );
  },
  stateAfterTool(state, toolCallId) {
    const cut = geminiStateAfterTool(JSON.parse(state) as GeminiSessionState, toolCallId);
    return cut === null ? null : { state: JSON.stringify(cut.state), later: cut.later };
  },
});
