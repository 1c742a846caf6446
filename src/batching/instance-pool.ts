import type { BatchTimings } from '../core/request.js';
import { batchAnswered, batchDispatched, traceNow } from '../core/trace-channels.js';
import type { BatchRunner } from './batch-runner.js';
import type { BatcherObserver, QueuedRequest, SubmitResult, TracedSubmission } from './batch-request.js';
import type { Clock } from './clock.js';
import { HANDOVER_BATCHES, HANDOVER_LEAD } from './tuning.js';

/** What the pool tells the batcher, in this order for a batch: it ran, its instance is free, its requests are answered. */
export interface PoolEvents {
  /** A batch's forward pass came back: `heldMs` is how long it held its instance, from when it could start there. */
  ran(shapeKey: string, rows: number, timings: BatchTimings, heldMs: number): void;
  /** An instance is done with a batch (or exclusive work), or exclusive work waits for one: look at the queue again. */
  freed(): void;
  /** A batch's requests all have their answers (or errors). */
  answered(): void;
}

/**
 * The model's instances and the batches on them: runs what it is given, on the instance it is
 * told, and answers each request of a batch. It decides nothing: the batcher picks the batch
 * and the instance. It knows which instances are idle, which hold a batch and, for one that
 * queues (BatchRunner.queuesBatches), whether a second waits there, and when each busy one is
 * expected to free (from the costs the batcher gave at dispatch).
 */
export class InstancePool {
  #runners: BatchRunner[];
  readonly #idle: BatchRunner[];
  /** Batches sent to each busy runner and not answered yet: 1, or 2 where it queues. */
  readonly #inFlight = new Map<BatchRunner, number>();
  /** When each runner last answered a batch: a batch queued behind another starts then, not when it was sent. */
  readonly #answeredAt = new Map<BatchRunner, number>();
  /** When each busy instance is expected to be free (while the cost line predicts). */
  readonly #expectedFreeAt = new Map<BatchRunner, number>();
  /** #freeInMs's array, reused. */
  readonly #freeIn: number[] = [];
  /** How long a batch sent to a free instance takes to start there, ms (the thread hop; averaged). */
  #handoverMs = 0;
  /** Work waiting for an instance of its own (`exclusive`), served before any batch. */
  readonly #exclusiveWaiters: ((runner: BatchRunner) => void)[] = [];
  /** Batches (and exclusive work) running. */
  running = 0;
  /** Rows in running batches. */
  runningRows = 0;

  constructor(
    runners: readonly BatchRunner[],
    private readonly clock: Clock,
    private readonly observer: BatcherObserver,
    private readonly events: PoolEvents,
  ) {
    this.#runners = [...runners];
    this.#idle = [...runners];
  }

  get size(): number {
    return this.#runners.length;
  }

  get idleCount(): number {
    return this.#idle.length;
  }

  get busyCount(): number {
    return this.#runners.length - this.#idle.length;
  }

  /** Replaces the instances; retired ones finish their running batch and are not reused. */
  setRunners(runners: readonly BatchRunner[]): void {
    const busy = new Set(this.#runners.filter((runner) => !this.#idle.includes(runner)));
    this.#runners = [...runners];
    this.#idle.length = 0;
    this.#idle.push(...runners.filter((runner) => !busy.has(runner)));
    this.#busyChanged();
  }

  takeIdle(): BatchRunner | undefined {
    return this.#idle.shift();
  }

  /** Hands idle instances to work waiting for one of its own, before any batch gets them. */
  serveExclusive(): void {
    while (this.#exclusiveWaiters.length > 0 && this.#idle.length > 0) {
      (this.#exclusiveWaiters.shift() as (runner: BatchRunner) => void)(this.#idle.shift() as BatchRunner);
    }
  }

  async exclusive<T>(work: (runner: BatchRunner) => Promise<T>): Promise<T> {
    const runner = await new Promise<BatchRunner>((resolve) => {
      this.#exclusiveWaiters.push(resolve);
      this.events.freed();
    });
    this.running += 1;
    try {
      return await work(runner);
    } finally {
      this.running -= 1;
      if (this.#runners.includes(runner)) this.#idle.push(runner);
      this.events.answered();
      this.events.freed();
    }
  }

  /**
   * Busy instances that queue and run one batch, with when a batch sent to each would start
   * as it frees: HANDOVER_LEAD hand-overs before it is expected free (Infinity when unknown).
   */
  *queueable(): Generator<{ runner: BatchRunner; sendAt: number; freeAt: number }> {
    for (const runner of this.#runners) {
      if (!runner.queuesBatches || this.#inFlight.get(runner) !== 1) continue;
      const freeAt = this.#expectedFreeAt.get(runner) ?? Infinity;
      yield { runner, sendAt: freeAt - HANDOVER_LEAD * this.#handoverMs, freeAt };
    }
  }

  /** Whether a runner holds exactly one batch. */
  holdsOne(runner: BatchRunner): boolean {
    return this.#inFlight.get(runner) === 1;
  }

  /** For each instance, ms until it is expected to be free (0 when idle); the array is reused. */
  freeInMs(now: number): number[] {
    const freeIn = this.#freeIn;
    freeIn.length = 0;
    for (const runner of this.#runners) freeIn.push(Math.max(0, (this.#expectedFreeAt.get(runner) ?? now) - now));
    return freeIn;
  }

  /**
   * Sends a batch of `rows` to `runner`; `expectedMs` is how long it should hold it (undefined:
   * unknown). Returns when it is expected to end, or undefined.
   */
  dispatch(
    runner: BatchRunner,
    batch: readonly QueuedRequest[],
    rows: number,
    expectedMs: number | undefined,
  ): number | undefined {
    const dispatchedAt = this.clock.now();
    let endsAt: number | undefined;
    if (expectedMs !== undefined) {
      // Queued behind a running batch, it frees the instance that much later.
      endsAt = Math.max(dispatchedAt, this.#expectedFreeAt.get(runner) ?? dispatchedAt) + expectedMs;
      this.#expectedFreeAt.set(runner, endsAt);
    }
    const sentAt = traceNow();
    let traced: TracedSubmission[] | undefined;
    for (const queued of batch) if (queued.trace) (traced ??= []).push(queued.trace);
    if (traced) {
      for (const trace of traced) {
        trace.dispatchedAt = sentAt;
        trace.batch = traced;
      }
    }
    this.running += 1;
    const toFree = !this.#inFlight.has(runner);
    if (batchDispatched.hasSubscribers) {
      batchDispatched.publish({ instance: runner.id, rows, at: sentAt, queuedBehind: !toFree });
    }
    this.#inFlight.set(runner, (this.#inFlight.get(runner) ?? 0) + 1);
    this.#busyChanged();
    void this.#execute(runner, batch, dispatchedAt, rows, toFree ? sentAt : undefined).finally(() =>
      this.events.answered(),
    );
    return endsAt;
  }

  /** `sentAt` (trace-channels.ts's clock): when the batch left for an instance that was free, to learn the hand-over. */
  async #execute(
    runner: BatchRunner,
    batch: readonly QueuedRequest[],
    dispatchedAt: number,
    rows: number,
    sentAt: number | undefined,
  ): Promise<void> {
    let result;
    try {
      result = await runner.run(batch.map((queued) => queued.request));
    } catch (error) {
      await this.#runAlone(runner, batch, error, dispatchedAt);
      this.#free(runner, rows);
      return;
    }
    const now = this.clock.now();
    const heldMs = now - Math.max(dispatchedAt, this.#answeredAt.get(runner) ?? dispatchedAt);
    const { responses, timings } = result;
    if (sentAt !== undefined && timings.startedAt !== undefined) {
      const handover = Math.max(0, timings.startedAt - sentAt);
      this.#handoverMs += (handover - this.#handoverMs) / HANDOVER_BATCHES;
    }
    this.events.ran((batch[0] as QueuedRequest).shapeKey, rows, timings, heldMs);
    this.observer.batchExecuted?.(rows, timings, runner.id);
    if (batchAnswered.hasSubscribers) {
      const computeMs = (timings.computeInputNs + timings.computeInferNs + timings.computeOutputNs) / 1e6;
      batchAnswered.publish({ instance: runner.id, rows, at: traceNow(), startedAt: timings.startedAt, computeMs });
    }
    // Freed before its requests are answered: the next batch is on its way while this thread writes them.
    this.#free(runner, rows);
    batch.forEach((queued, index) =>
      finish(queued, { response: responses[index], timings, batchRows: rows, instanceId: runner.id }, dispatchedAt),
    );
  }

  /** One bad request must not fail its batch-mates: each runs alone, so only it fails. */
  async #runAlone(
    runner: BatchRunner,
    batch: readonly QueuedRequest[],
    error: unknown,
    dispatchedAt: number,
  ): Promise<void> {
    if (batch.length === 1) {
      (batch[0] as QueuedRequest).state = 'done';
      (batch[0] as QueuedRequest).reject(error);
      return;
    }
    for (const queued of batch) {
      try {
        const { responses, timings } = await runner.run([queued.request]);
        this.observer.batchExecuted?.(queued.rows, timings, runner.id);
        finish(
          queued,
          { response: responses[0], timings, batchRows: queued.rows, instanceId: runner.id },
          dispatchedAt,
        );
      } catch (soloError) {
        queued.state = 'done';
        queued.reject(soloError);
      }
    }
  }

  #free(runner: BatchRunner, rows: number): void {
    this.running -= 1;
    this.runningRows -= rows;
    this.#answeredAt.set(runner, this.clock.now());
    const left = (this.#inFlight.get(runner) ?? 1) - 1;
    if (left > 0) this.#inFlight.set(runner, left);
    else {
      this.#inFlight.delete(runner);
      this.#expectedFreeAt.delete(runner);
      if (this.#runners.includes(runner)) this.#idle.push(runner);
    }
    this.events.freed();
  }

  #busyChanged(): void {
    this.observer.busyChanged?.(this.busyCount, this.#runners.length);
  }
}

/** A runner answers one request of a batch with an Error (a pipeline step failed it): that request fails alone. */
function finish(queued: QueuedRequest, result: Omit<SubmitResult, 'queueNs'>, dispatchedAt: number): void {
  queued.state = 'done';
  if (result.response instanceof Error) {
    queued.reject(result.response);
    return;
  }
  queued.resolve({ ...result, queueNs: Math.round((dispatchedAt - queued.enqueuedAt) * 1e6) });
}
