/** Waits for `promise` at most `ms`; null when it did not settle in time (it is not cancelled). */
export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([promise, new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), ms)))]).finally(
    () => clearTimeout(timer),
  );
}
