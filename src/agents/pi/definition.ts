import { z } from 'zod';
import { callerOptions } from '../shared/caller-options.ts';
import { THINKING_LEVELS } from './options.ts';
import type { AgentDefinition } from '../agent-definition.ts';
import { defineAgentDefinition } from '../shared/define-agent.ts';
import { PiMapper } from './mapper.ts';
import type { PiOptionsInput } from './options.ts';
import { runPi } from './provider.ts';
import {
  checkPiState,
  exportPiSession,
  forkPiSession,
  importPiSession,
  piStateAfterTool,
  piStateAtMark,
  piStateMark,
  type PiSessionState,
} from './session-file.ts';

function sessionDir(options: Readonly<Record<string, unknown>>): string | null {
  return typeof options.sessionDir === 'string' ? options.sessionDir : null;
}

export const pi: AgentDefinition = defineAgentDefinition<PiOptionsInput>({
  callerOptions: callerOptions({
    provider: z.string().min(1).max(200).optional(),
    model: z.string().min(1).max(200).optional(),
    thinking: z.enum(THINKING_LEVELS).optional(),
    tools: z
      .array(z.string().regex(/^[\w.-]+$/, 'must be a tool name'))
      .max(100)
      .optional(),
    agentDir: z.string().min(1).max(4096).optional(),
  }),
  permissions: {
    lists: [{ option: 'tools', defaultAllowed: '*', absentMeansAll: true }],
    switches: [
      {
        option: 'extensions',
        description: 'pi loads and runs extensions from <cwd>/.pi/extensions and <agentDir>/extensions',
      },
    ],
  },
  // pi in rpc mode takes a `steer` command into its running turn (rpc.ts).
  steering: 'native',
  run: (request, context) =>
    runPi(
      {
        ...request.options,
        prompt: request.text,
        session:
          request.resumeSessionId === null
            ? (request.options.session ?? { mode: 'new' })
            : { mode: 'resume', id: request.resumeSessionId },
      },
      context,
    ),
  createMapper: (options) => new PiMapper(options),
  async exportState(options, agentSessionId) {
    const dir = sessionDir(options);
    if (dir === null) return null;
    const state = await exportPiSession(dir, agentSessionId);
    return state === null ? null : JSON.stringify(state);
  },
  forkState: (state, from, to) => JSON.stringify(forkPiSession(JSON.parse(state) as PiSessionState, from, to)),
  stateMark: (state) => piStateMark(JSON.parse(state) as PiSessionState),
  stateAtMark: (state, mark) => JSON.stringify(piStateAtMark(JSON.parse(state) as PiSessionState, mark)),
  checkState: (state, agentSessionId) => void checkPiState(state, agentSessionId),
  async importState(options, agentSessionId, state, how) {
    const dir = sessionDir(options);
    if (dir === null) return;
    await importPiSession(
      dir,
      JSON.parse(state) as PiSessionState,
      typeof options.cwd === 'string' ? options.cwd : undefined,
      agentSessionId,
      how?.exact === true,
    );
  },
  // pi writes files only through its tools (no hooks of its own run after them): see filesOnlyThroughTools.
  filesOnlyThroughTools: true,
  stateAfterTool(state, toolCallId) {
    const cut = piStateAfterTool(JSON.parse(state) as PiSessionState, toolCallId);
    return cut === null ? null : { state: JSON.stringify(cut.state), later: cut.later };
  },
});
