import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { exportChart } from '../../machines/definition.ts';
import { sessionMachine } from '../../machines/session.machine.ts';
import { MACHINE_STATES, QUIESCENT_STATES, SESSION_STATES, SETTLED_STATES } from '../../machines/states.ts';
import { registerList } from '../../src/interfaces/cli/commands/list.ts';
import { openApiDocument } from '../../src/interfaces/http/openapi.ts';
import { ListQuery } from '../../src/interfaces/http/routes/sessions.ts';

// The machine's states as the statechart export sees them: independent of machines/states.ts.
const chartStates = exportChart(sessionMachine).states.map((s) => s.name);

function listStateChoices(): readonly string[] {
  const program = new Command();
  registerList(program);
  const option = program.commands.find((c) => c.name() === 'list')?.options.find((o) => o.long === '--state');
  return option?.argChoices ?? [];
}

describe('the session states', () => {
  it('are the machine’s own states, plus queued', () => {
    expect([...MACHINE_STATES].sort()).toEqual([...chartStates].sort());
    expect([...SESSION_STATES].sort()).toEqual(['queued', ...chartStates].sort());
  });

  it('are listed in the order the machine declares them', () => {
    expect([...MACHINE_STATES]).toEqual(Object.keys(sessionMachine.root.states));
  });

  it('include the states a restore alone reaches', () => {
    expect(SESSION_STATES).toContain('interrupted');
    expect(SESSION_STATES).toContain('cancelInterrupted');
  });

  it('name only states of the machine in their groups', () => {
    for (const state of [...SETTLED_STATES, ...QUIESCENT_STATES]) expect(['queued', ...chartStates]).toContain(state);
  });

  it('are every choice `sessiond list --state` accepts, no more, no less', () => {
    expect([...listStateChoices()].sort()).toEqual(['queued', ...chartStates].sort());
  });

  it('are every state the API list filter accepts; anything else is refused naming the states', () => {
    for (const state of ['queued', ...chartStates]) expect(ListQuery.safeParse({ state }).success, state).toBe(true);
    const refused = ListQuery.safeParse({ state: 'sleeping' });
    expect(refused.success).toBe(false);
    expect(refused.error?.issues[0]?.message).toContain('cancelInterrupted');
  });

  it('are the enum of the OpenAPI document’s state filter', () => {
    const operation = (
      openApiDocument() as {
        paths: Record<string, { get?: { parameters?: Array<{ name: string; schema: { enum?: string[] } }> } }>;
      }
    ).paths['/api/sessions']?.get;
    const filter = operation?.parameters?.find((p) => p.name === 'state');
    expect([...(filter?.schema.enum ?? [])].sort()).toEqual(['queued', ...chartStates].sort());
  });
});
