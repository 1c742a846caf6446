import FakeTimers from '@sinonjs/fake-timers';
import { Batcher } from '../../src/batching/batcher.js';
import type { BatcherObserver, BatchingPolicy, SubmitOptions, SubmitResult } from '../../src/batching/batch-request.js';
import type { BatchRunner } from '../../src/batching/batch-runner.js';
import type { Clock } from '../../src/batching/clock.js';
import { InferenceInputError } from '../../src/core/errors.js';
import type { BatchTimings, HandlerRequest } from '../../src/core/request.js';

export const TIMINGS: BatchTimings = { computeInputNs: 1, computeInferNs: 2, computeOutputNs: 3 };

/**
 * A real BatchRunner whose forward pass is "double each value", and which completes only
 * when the test releases it, so the test controls when an instance frees. A request whose
 * body is "poison" makes the whole pass throw, like a bad input would.
 */
export class GatedRunner implements BatchRunner {
  readonly device = 'test';
  readonly batches: number[][] = [];
  readonly #gates: (() => void)[] = [];
  readonly #gated: boolean;
  constructor(
    readonly id: string,
    gated = true,
  ) {
    this.#gated = gated;
  }

  async run(requests: readonly HandlerRequest[]): Promise<{ responses: unknown[]; timings: BatchTimings }> {
    const values = requests.map(valueOf);
    this.batches.push(values);
    if (this.#gated) await new Promise<void>((resolve) => this.#gates.push(resolve));
    if (requests.some((request) => request.kind === 'body' && request.body.toString() === 'poison')) {
      throw new InferenceInputError('poisoned');
    }
    return { responses: values.map((value) => value * 2), timings: TIMINGS };
  }

  /** Lets the oldest running batch finish. */
  release(): void {
    this.#gates.shift()?.();
  }
}

const valueOf = (request: HandlerRequest): number => Number(request.kind === 'body' ? request.body.toString() : NaN);
export const req = (value: number | string): HandlerRequest => ({
  kind: 'body',
  body: Buffer.from(String(value)),
  contentType: undefined,
  movable: false,
});

export const DEFAULT_POLICY: BatchingPolicy = {
  maxBatchSize: 8,
  maxQueueDelayUs: 5_000,
  preferredBatchSizes: [],
  maxQueueSize: 100,
  defaultTimeoutUs: 0,
  priorityLevels: 1,
};

/**
 * A batcher on a fake clock. The clock starts well after 0 so that a mix-up between an
 * instant and a duration shows.
 */
export function setup(
  policy: Partial<BatchingPolicy>,
  runners: BatchRunner[] = [new GatedRunner('i0')],
  observer: BatcherObserver = {},
) {
  const fake = FakeTimers.createClock(1_000);
  const clock: Clock = {
    now: () => fake.now,
    setTimeout: (callback, ms) => fake.setTimeout(callback, ms),
    clearTimeout: (handle) => fake.clearTimeout(handle as FakeTimers.TimerId),
  };
  const batcher = new Batcher(runners, { ...DEFAULT_POLICY, ...policy }, observer, clock);
  const submit = (value: number | string, options: Partial<SubmitOptions> = {}): Promise<SubmitResult> =>
    batcher.submit(req(value), { rows: 1, shapeKey: 'a', ...options });
  return { fake, batcher, submit, runner: runners[0] as GatedRunner };
}

/** Lets promise callbacks run (the runner is async). */
export const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Runs a gated instance as a device of cost T(B) = 5 + 0.5·B ms on fake time, in 0.5 ms steps:
 * each batch is let go once its T(B) has passed, until `done` (told how many were let go) or
 * `maxSteps`.
 */
export async function runAtCost(
  fake: ReturnType<typeof FakeTimers.createClock>,
  runner: GatedRunner,
  done: (released: number) => boolean,
  maxSteps: number,
): Promise<void> {
  let released = 0;
  let doneAt = Infinity;
  for (let step = 0; step < maxSteps && !done(released); step++) {
    await settle();
    if (doneAt === Infinity && runner.batches.length > released) {
      doneAt = fake.now + 5 + 0.5 * (runner.batches[released] as unknown[]).length;
    }
    if (fake.now >= doneAt) {
      runner.release();
      released += 1;
      doneAt = Infinity;
    } else {
      fake.tick(0.5);
    }
  }
}

/** What a request came to: its response, or its error code. */
export async function outcome(result: Promise<SubmitResult>): Promise<unknown> {
  try {
    return (await result).response;
  } catch (error) {
    return (error as { code?: string }).code;
  }
}
