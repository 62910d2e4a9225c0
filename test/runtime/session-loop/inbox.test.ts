import { afterEach, describe, expect, it, vi } from 'vitest';
import type { BusEvent, EventBus } from '../../../src/runtime/event-bus.ts';
import { HolderInbox } from '../../../src/runtime/session-loop/inbox.ts';

/** The bus as the inbox uses it: listeners per session id (the real one is Redis pub/sub, tested in the runtime suites). */
function fakeBus() {
  const listeners = new Map<string, Set<(event: BusEvent) => void>>();
  const bus = {
    on(sessionId: string, listener: (event: BusEvent) => void) {
      const set = listeners.get(sessionId) ?? new Set();
      set.add(listener);
      listeners.set(sessionId, set);
      return () => set.delete(listener);
    },
  } as unknown as EventBus;
  const publish = (event: BusEvent): void => {
    for (const listener of listeners.get(event.sessionId) ?? []) listener(event);
  };
  return { bus, publish, listening: (sessionId: string) => listeners.get(sessionId)?.size ?? 0 };
}

describe("the holder's inbox", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('starts with the prompts, the cancel and the policy to look at, each taken once', () => {
    const inbox = new HolderInbox();
    expect([
      inbox.take('prompt'),
      inbox.take('cancel'),
      inbox.take('policy'),
      inbox.take('unqueue'),
      inbox.take('resume'),
    ]).toEqual([true, true, true, false, false]);
    expect(inbox.take('prompt')).toBe(false);
  });

  it("a bus event of the session becomes a pending request and wakes the loop; another session's does not", async () => {
    const { bus, publish } = fakeBus();
    const inbox = new HolderInbox();
    inbox.listen(bus, 's1', 60_000);
    for (const request of ['prompt', 'cancel', 'policy'] as const) inbox.take(request);
    const woken = inbox.next();
    publish({ sessionId: 's2', kind: 'cancel' });
    publish({ sessionId: 's1', kind: 'unqueue' });
    await woken;
    expect(inbox.take('cancel')).toBe(false);
    expect(inbox.take('unqueue')).toBe(true);
    inbox.close();
  });

  it('an arrival while the loop is busy (not waiting) ends its next wait at once, not at the next poll', async () => {
    const { bus, publish } = fakeBus();
    const inbox = new HolderInbox();
    inbox.listen(bus, 's1', 60_000);
    for (const request of ['prompt', 'cancel', 'policy'] as const) inbox.take(request);
    publish({ sessionId: 's1', kind: 'cancel' });
    let woken = false;
    const waited = inbox.next().then(() => {
      woken = true;
    });
    await Promise.resolve();
    expect(woken).toBe(true);
    await waited;
    expect(inbox.take('cancel')).toBe(true);
    inbox.close();
  });

  it('the poll asks for the prompts and the cancel again', async () => {
    vi.useFakeTimers();
    const { bus } = fakeBus();
    const inbox = new HolderInbox();
    inbox.listen(bus, 's1', 1_000);
    for (const request of ['prompt', 'cancel', 'policy'] as const) inbox.take(request);
    const woken = inbox.next();
    await vi.advanceTimersByTimeAsync(1_000);
    await woken;
    expect([inbox.take('prompt'), inbox.take('cancel'), inbox.take('policy')]).toEqual([true, true, false]);
    inbox.close();
  });

  it("an approval decision reaches the attempts' listeners until they unsubscribe; close stops listening to the bus", () => {
    const { bus, publish, listening } = fakeBus();
    const inbox = new HolderInbox();
    inbox.listen(bus, 's1', 60_000);
    const heard: string[] = [];
    const unsubscribe = inbox.onApproval(() => heard.push('decision'));
    publish({ sessionId: 's1', kind: 'approval' });
    unsubscribe();
    publish({ sessionId: 's1', kind: 'approval' });
    expect(heard).toEqual(['decision']);
    expect(listening('s1')).toBe(1);
    inbox.close();
    expect(listening('s1')).toBe(0);
  });
});
