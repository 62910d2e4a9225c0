/**
 * A schedule's firing stores its prompt under the id `schedule:<scheduleId>:<tick>` (the tick: the epoch ms it was
 * scheduled for), so the turn it starts says where it came from (`inspect`'s turn and history: `schedule`). Its own
 * module: the readers (inspect, the dashboard's views) load it without BullMQ or zod.
 */
export function schedulePromptId(scheduleId: string, tick: number): string {
  return `schedule:${scheduleId}:${tick}`;
}

/** The schedule and tick a prompt id names, or null for any other prompt. */
export function scheduleOfPrompt(promptId: string | undefined | null): { id: string; tick: number } | null {
  if (typeof promptId !== 'string' || !promptId.startsWith('schedule:')) return null;
  const [, id, tick] = promptId.split(':');
  const at = Number(tick);
  return id === undefined || id === '' || !Number.isSafeInteger(at) ? null : { id, tick: at };
}
