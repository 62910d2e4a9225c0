import { findProcessesByMarker } from '../../process/index.ts';

/**
 * Stops (SIGSTOP) every live process of an attempt (those carrying its marker) until the returned
 * function continues them (SIGCONT, once): what they do cannot change while sessiond reads their
 * files. A process that ends meanwhile is skipped. If the worker dies before continuing them, its
 * successor on this host kills them as orphans (src/runtime/orphans.ts).
 */
export async function pauseProcesses(marker: string): Promise<() => void> {
  const stopped: number[] = [];
  for (const { pid } of await findProcessesByMarker(marker)) {
    try {
      process.kill(pid, 'SIGSTOP');
      stopped.push(pid);
    } catch {
      // Ended between the scan and the signal: nothing to hold.
    }
  }
  return () => {
    for (const pid of stopped.splice(0)) {
      try {
        process.kill(pid, 'SIGCONT');
      } catch {
        // Ended meanwhile (killed by a stop): nothing to continue.
      }
    }
  };
}
