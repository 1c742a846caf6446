/** Time as the batcher sees it, injectable so tests can drive delays and timeouts exactly. */
export interface Clock {
  /** Milliseconds, monotonic, fractional. */
  now(): number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const realClock: Clock = {
  now: () => performance.now(),
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};
