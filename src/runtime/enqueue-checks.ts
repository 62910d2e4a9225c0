/**
 * What `Runtime.enqueue` checks a request's options with: the agent registry's option schemas and
 * the deployment policy. Loaded on first use (it imports every agent), so a command that only
 * reads (`sessiond inspect`, `list`) never loads the agents.
 */
export { admitTurn } from './deployment-policy.ts';
export { DEFAULT_AGENT } from '../agents/default-agent.ts';
export { TurnOptionsSchema } from './turn-options.ts';
