import ort from 'onnxruntime-node';
import { allocateTensorData, ortTypeOf } from '../core/datatypes.js';
import type { TensorSpec } from '../core/tensors.js';
import { modelConfigSchema, type SimulatedDeviceConfig } from '../config/model-config.js';

/** The config device whose instances run on a SimulatedSession. */
export const SIMULATED_DEVICE = 'sim';

/** The costs of `simulated_device` when a model on device `sim` does not set them. */
export const DEFAULT_SIMULATED_DEVICE: SimulatedDeviceConfig = Object.freeze({
  fixed_cost: modelConfigSchema.fields.simulated_device.fields.fixed_cost.default,
  row_cost: modelConfigSchema.fields.simulated_device.fields.row_cost.default,
});

/** The part of a session a handler calls. */
type SessionRun = Pick<ort.InferenceSession, 'run' | 'release' | 'inputNames' | 'outputNames'>;

/**
 * An accelerator with exact costs: `run` blocks its thread, as a GPU call blocks the instance
 * thread that waits for it, for fixed_cost + B × row_cost (B: the first input's first
 * dimension) without using the CPU (Atomics.wait), and answers zeros in every output's shape;
 * a dimension the model leaves variable takes the first input's size on that axis (the batch,
 * on axis 0). For instances on their own thread (`runtime.thread: worker`, the default).
 *
 * Atomics.wait returns about 0.1 ms after its timeout here (timer slack): the session learns
 * that overshoot as it runs and asks for that much less, so a pass takes its cost to within
 * a few tens of µs.
 */
export class SimulatedSession implements SessionRun {
  readonly #real: ort.InferenceSession;
  readonly #cost: SimulatedDeviceConfig;
  readonly #outputs: readonly TensorSpec[];
  readonly #cell = new Int32Array(new SharedArrayBuffer(4));
  /** How far past its timeout Atomics.wait has been returning, ms. */
  #overshootMs = 0;

  constructor(real: ort.InferenceSession, cost: SimulatedDeviceConfig, outputs: readonly TensorSpec[]) {
    this.#real = real;
    this.#cost = cost;
    this.#outputs = outputs;
  }

  get inputNames(): readonly string[] {
    return this.#real.inputNames;
  }

  get outputNames(): readonly string[] {
    return this.#real.outputNames;
  }

  /** The cost of one pass of `rows`, ms. */
  passMs(rows: number): number {
    return (this.#cost.fixed_cost + rows * this.#cost.row_cost) / 1000;
  }

  run(feeds: ort.InferenceSession.FeedsType, fetches?: unknown): Promise<ort.InferenceSession.ReturnType> {
    const first = Object.values(feeds)[0];
    const dims = first?.dims ?? [];
    this.#hold(this.passMs(dims[0] ?? 1));
    const wanted = Array.isArray(fetches) ? new Set(fetches as string[]) : undefined;
    const results: Record<string, ort.Tensor> = {};
    for (const output of this.#outputs) {
      if (wanted && !wanted.has(output.name)) continue;
      const shape = output.shape.map((dim, axis) => (dim === -1 ? (dims[axis] ?? 1) : dim));
      const type = ortTypeOf(output.datatype);
      const size = shape.reduce((total, dim) => total * dim, 1);
      results[output.name] = new ort.Tensor(type, allocateTensorData(type, size), shape);
    }
    return Promise.resolve(results);
  }

  release(): Promise<void> {
    return this.#real.release();
  }

  #hold(ms: number): void {
    const started = performance.now();
    Atomics.wait(this.#cell, 0, 0, Math.max(0, ms - this.#overshootMs));
    const overshoot = performance.now() - started - ms;
    // A quarter of each error: converges in a few passes, and one late wake-up moves it little.
    this.#overshootMs = Math.min(1, Math.max(-1, this.#overshootMs + overshoot / 4));
  }
}
