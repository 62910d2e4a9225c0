import type { AnyStateMachine } from 'xstate';

export interface ChartTransition {
  event: string;
  target: string | null;
  guard: string | null;
}

export interface ChartState {
  name: string;
  invokes: string[];
  transitions: ChartTransition[];
}

export interface Chart {
  id: string;
  initial: string | null;
  states: ChartState[];
}

/**
 * The machine's states and transitions as plain JSON, for drawing the statechart
 * (dashboard, docs). Eventless (`always`) transitions are listed with event "always";
 * delayed ones with event "after".
 */
export function exportChart(machine: AnyStateMachine): Chart {
  const root = machine.root;
  const local = (id: string | undefined): string | null => (id === undefined ? null : id.replace(`${root.id}.`, ''));
  const states: ChartState[] = Object.entries(root.states).map(([name, node]) => {
    const transitions: ChartTransition[] = [];
    for (const t of [...node.transitions.values()].flat()) {
      const event = t.eventType.startsWith('xstate.after.')
        ? 'after'
        : t.eventType.startsWith('xstate.done.actor')
          ? 'done'
          : t.eventType.startsWith('xstate.error.actor')
            ? 'error'
            : t.eventType;
      for (const target of t.target ?? [undefined])
        transitions.push({ event, target: local(target?.id), guard: guardName(t.guard) });
    }
    for (const t of node.always ?? []) {
      for (const target of t.target ?? [undefined])
        transitions.push({ event: 'always', target: local(target?.id), guard: guardName(t.guard) });
    }
    const rootOn = [...root.transitions.values()]
      .flat()
      .map((t) => ({ event: t.eventType, target: null, guard: guardName(t.guard) }));
    return { name, invokes: node.invoke.map((i) => String(i.src)), transitions: [...transitions, ...rootOn] };
  });
  const initial = root.initial?.target[0]?.id;
  return { id: root.id, initial: local(initial), states };
}

function guardName(guard: unknown): string | null {
  if (guard === undefined || guard === null) return null;
  if (typeof guard === 'string') return guard;
  if (typeof guard === 'object' && 'type' in guard && typeof (guard as { type: unknown }).type === 'string')
    return (guard as { type: string }).type;
  return 'guard';
}
