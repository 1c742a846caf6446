import type { SimulatedDeviceConfig } from '../config/model-config.js';

/** Node has had Atomics.waitAsync since 16; TypeScript declares it only from lib es2024. */
const { waitAsync } = Atomics as unknown as {
  waitAsync(
    this: void,
    cell: Int32Array,
    index: number,
    value: number,
    timeoutMs: number,
  ): { async: boolean; value: Promise<string> | string };
};

/** Holds a decoding step until it has taken its simulated cost; resolves then. */
export type StepPacer = (tokens: number, startedAt: number) => Promise<void>;

/**
 * The simulated accelerator for a generator: a step that fed `tokens` tokens takes
 * fixed_cost + tokens × row_cost of wall time, however fast the real (small) decoder ran. The
 * wait is Atomics.waitAsync, so the server's thread, which the generator shares, goes on
 * answering meanwhile; like SimulatedSession it learns the wake-up's overshoot and asks for
 * that much less.
 */
export function simulatedStepPacer(cost: SimulatedDeviceConfig): StepPacer {
  const cell = new Int32Array(new SharedArrayBuffer(4));
  let overshootMs = 0;
  return async (tokens, startedAt) => {
    const dueMs = (cost.fixed_cost + tokens * cost.row_cost) / 1000;
    const leftMs = startedAt + dueMs - performance.now();
    if (leftMs > overshootMs) {
      const waited = waitAsync(cell, 0, 0, leftMs - overshootMs);
      if (waited.async) await waited.value;
    }
    const overshoot = performance.now() - startedAt - dueMs;
    overshootMs = Math.min(1, Math.max(-1, overshootMs + overshoot / 4));
  };
}
