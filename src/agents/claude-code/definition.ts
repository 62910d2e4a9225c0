import { z } from 'zod';
import { callerOptions } from '../shared/caller-options.ts';
import { PERMISSION_MODES } from './options.ts';
import type { AgentDefinition } from '../agent-definition.ts';
import { defineAgentDefinition } from '../shared/define-agent.ts';
import { ClaudeCodeMapper } from './mapper.ts';
import type { ClaudeCodeOptionsInput } from './options.ts';
import { runClaudeCode } from './provider.ts';
import {
  checkClaudeState,
  claudeConfigDir,
  claudeStateAfterTool,
  exportClaudeSession,
  importClaudeSession,
  parseClaudeSessionState,
} from './session-file.ts';

export const claudeCode: AgentDefinition = defineAgentDefinition<ClaudeCodeOptionsInput>({
  callerOptions: callerOptions({
    model: z.string().min(1).max(200).optional(),
    permissionMode: z.enum(PERMISSION_MODES).optional(),
    allowedTools: z.array(z.string().min(1).max(500)).max(100).optional(),
    disallowedTools: z.array(z.string().min(1).max(500)).max(100).optional(),
  }),
  permissions: {
    ladder: {
      option: 'permissionMode',
      steps: ['plan', 'dontAsk', 'default', 'acceptEdits', 'bypassPermissions'],
      defaultStep: 'default',
      defaultCeiling: 'acceptEdits',
    },
    // Each allowed tool rule is a pre-approval: none for callers unless the deployment lists them.
    lists: [{ option: 'allowedTools', defaultAllowed: [], absentMeansAll: false }],
  },
  run: (request, context) =>
    runClaudeCode(
      {
        ...request.options,
        prompt: request.text,
        session: request.resumeSessionId === null ? { mode: 'new' } : { mode: 'resume', id: request.resumeSessionId },
      },
      context,
    ),
  createMapper: (options) => new ClaudeCodeMapper(options),
  async exportState(options, agentSessionId) {
    const state = await exportClaudeSession(claudeConfigDir(options), agentSessionId);
    return state === null ? null : JSON.stringify(state);
  },
  checkState: (state, agentSessionId) => void checkClaudeState(state, agentSessionId),
  async importState(options, agentSessionId, state, how) {
    const cwd = typeof options.cwd === 'string' ? options.cwd : undefined;
    const parsed = parseClaudeSessionState(state);
    await importClaudeSession(claudeConfigDir(options), agentSessionId, parsed, cwd, how?.exact === true);
  },
  stateAfterTool(state, toolCallId) {
    const cut = claudeStateAfterTool(parseClaudeSessionState(state), toolCallId);
    return cut === null ? null : { state: JSON.stringify(cut.state), later: cut.later };
  },
});
