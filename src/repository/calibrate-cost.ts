import { batchCostMs, type Batcher } from '../batching/batcher.js';
import type { CompleteModelConfig } from '../config/model-config.js';
import type { HandlerRequest } from '../core/request.js';
import { syntheticTensors } from '../core/tensors.js';

/**
 * Untimed rounds first: onnxruntime's first passes at a new shape are slower (allocations, the
 * memory pattern it learns on the second), by 1.5–2× on the cost model of benchmarks/adaptive.js.
 */
const WARM_ROUNDS = 2;
/** Each size is timed this many times: its median shrugs off one slow pass. */
const REPEATS = 3;
/** After the first round, further rounds stop once calibration has taken this long. */
const BUDGET_MS = 1_000;

/**
 * The batch sizes timed at load for `max_queue_delay: auto`: 1, half the largest batch and
 * the largest, all valid for the model. Three sizes, so the cost line is trusted from the
 * first request (cost-fit.ts needs three); fewer when max_batch_size is below 3.
 */
export function calibrationSizes(maxBatchSize: number): number[] {
  return [...new Set([1, Math.ceil(maxBatchSize / 2), maxBatchSize])].filter((size) => size >= 1);
}

/**
 * Times batches of one-row requests of zeros at each calibration size on one instance (held
 * from the batcher meanwhile, so no live batch shares it), as the batcher times its own
 * (`batchCostMs`: the instance's compute time), and hands each timing to the batcher as the prior of its cost line. Returns the
 * timings, ms by size.
 */
export async function calibrateCost(
  batcher: Batcher,
  config: CompleteModelConfig,
): Promise<{ rows: number; ms: number }[]> {
  const request: HandlerRequest = {
    kind: 'tensors',
    inputs: syntheticTensors(config.inputs, 1),
    rows: 1,
    movable: false,
  };
  const sizes = calibrationSizes(config.max_batch_size);
  return batcher.exclusive(async (runner) => {
    const timed: { rows: number; ms: number }[] = [];
    for (let round = 0; round < WARM_ROUNDS; round++) {
      for (const rows of sizes) await runner.run(Array.from({ length: rows }, () => request));
    }
    const started = performance.now();
    for (let round = 0; round < REPEATS; round++) {
      if (round > 0 && performance.now() - started > BUDGET_MS) break;
      for (const rows of sizes) {
        const requests = Array.from({ length: rows }, () => request);
        const before = performance.now();
        const { timings } = await runner.run(requests);
        timed.push({ rows, ms: batchCostMs(timings, performance.now() - before) });
      }
    }
    for (const { rows, ms } of timed) batcher.seedCost(rows, ms);
    return timed;
  });
}
