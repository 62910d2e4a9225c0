import { describe, expect, it } from 'vitest';
import { AGENT_NAMES } from '../../../src/agents/registry.ts';
import { BUILTIN_AGENT_NAMES } from '../../../src/interfaces/cli/agent-names.ts';

describe("the CLI's agent names (its help and flag choices, without loading the agents)", () => {
  it("are the registry's built-in agents, in the registry's order", () => {
    expect([...BUILTIN_AGENT_NAMES]).toEqual(AGENT_NAMES);
  });
});
