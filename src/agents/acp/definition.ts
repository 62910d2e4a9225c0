import { callerOptions } from '../shared/caller-options.ts';
import { z } from 'zod';
import type { AgentDefinition } from '../agent-definition.ts';
import { defineAgentDefinition } from '../shared/define-agent.ts';
import { AcpLineMapper } from './mapper.ts';
import { PERMISSION_MODES, type AcpOptionsInput } from './options.ts';
import { runAcp } from './provider.ts';

/**
 * Every agent that speaks the Agent Client Protocol over stdio, as `acp:<name>`: the operator
 * configures each by name in the host configuration (`agents."acp:gemini": {command, args,
 * env}`), a caller picks one (`--agent acp:gemini`). The agent keeps its conversation state
 * itself (resumed with `session/resume` or `session/load` where it offers them), on the host it
 * runs on: there is no export/import, so a resume on another host finds no session.
 */
export const acpAgent: AgentDefinition = defineAgentDefinition<AcpOptionsInput>({
  callerOptions: callerOptions({ permissionMode: z.enum(PERMISSION_MODES).optional() }),
  permissions: {
    ladder: { option: 'permissionMode', steps: PERMISSION_MODES, defaultStep: 'reject', defaultCeiling: 'reject' },
  },
  run: (request, context) =>
    runAcp(
      {
        ...request.options,
        prompt: request.text,
        session: request.resumeSessionId === null ? { mode: 'new' } : { mode: 'resume', id: request.resumeSessionId },
        // `command` comes from the host's options; absent, the provider's own check ends the attempt as a startup failure.
      } as AcpOptionsInput,
      context,
    ),
  createMapper: (options) => new AcpLineMapper(options),
  // Native when the agent advertises the steering extension at initialize (steering.ts), else the fallback.
  steering: 'advertised',
});
