import { refusalOf, reservationRefusal, type AdmissionState } from './admission.js';
import { AutoPolicy } from './auto-policy.js';
import { BatchCosts } from './batch-costs.js';
import { FixedDelayPolicy, fullBatchRows, type BatchPolicy, type GroupView } from './batch-policy.js';
import {
  batchCostMs,
  effectiveTimeoutUs,
  type BatcherObserver,
  type BatchingPolicy,
  type QueueReservation,
  type SubmitOptions,
  type SubmitResult,
} from './batch-request.js';
import type { BatchRunner } from './batch-runner.js';
import { realClock, type Clock } from './clock.js';
import type { CostFit } from './cost-fit.js';
import { InstancePool } from './instance-pool.js';
import { RequestQueue, type ShapeGroup } from './request-queue.js';
import type { BatchTimings, HandlerRequest } from '../core/request.js';

/**
 * Dynamic batching for one model version, in four parts: the queue (request-queue.ts) holds
 * requests, a policy (batch-policy.ts: a fixed delay; auto-policy.ts: `auto`) says which rows
 * to take now or when to look again, admission (admission.ts) refuses what cannot be served,
 * and the pool (instance-pool.ts) runs batches. This class is the tick that joins them: on
 * each arrival, completion and timer it serves the shape groups, oldest first, while an
 * instance is free, then queues a batch on each instance about to free.
 */
export class Batcher {
  #policy: BatchPolicy;
  /** Kept across reconfigures: what auto learnt of the traffic outlives a switch to a delay and back. */
  #auto: AutoPolicy | undefined;
  readonly #costs = new BatchCosts();
  readonly #queue: RequestQueue;
  readonly #pool: InstancePool;
  #wakeTimer: unknown;
  #wakeAt = Infinity;
  #drainWaiters: (() => void)[] = [];
  /** Set while draining: queued requests go at once instead of waiting for fuller batches. */
  #flushing = false;
  readonly #observer: BatcherObserver;
  readonly #clock: Clock;

  constructor(
    runners: readonly BatchRunner[],
    policy: BatchingPolicy,
    observer: BatcherObserver = {},
    clock: Clock = realClock,
  ) {
    this.#observer = observer;
    this.#clock = clock;
    this.#policy = this.#policyFor(policy);
    this.#queue = new RequestQueue(policy.priorityLevels, clock, () => {
      this.#queueMoved();
      this.#notifyIfDrained();
      this.#tick();
    });
    this.#pool = new InstancePool(runners, clock, observer, {
      ran: (shapeKey, rows, timings, heldMs) => this.#ran(shapeKey, rows, timings, heldMs),
      freed: () => {
        this.#observer.pendingChanged?.(this.#queue.queuedRows + this.#pool.runningRows);
        this.#observer.busyChanged?.(this.#pool.busyCount, this.#pool.size);
        this.#tick();
      },
      answered: () => this.#notifyIfDrained(),
    });
  }

  get rowsQueued(): number {
    return this.#queue.queuedRows;
  }

  /** Rows held for admitted requests whose bodies are still arriving. */
  get rowsReserved(): number {
    return this.#queue.reservedRows;
  }

  get busyInstances(): number {
    return this.#pool.busyCount;
  }

  get batchingPolicy(): BatchingPolicy {
    return this.#policy.config;
  }

  /**
   * Holds one row of queue space for a request whose body is still arriving, so a full queue
   * refuses it at its headers instead of after reading and decoding it. Its real row count,
   * known once decoded, is checked again by `submit`.
   */
  reserve(): QueueReservation {
    const refusal = reservationRefusal(this.#admissionState());
    if (refusal) throw refusal;
    return this.#queue.hold();
  }

  submit(request: HandlerRequest, options: SubmitOptions): Promise<SubmitResult> {
    options.reservation?.release();
    const config = this.#policy.config;
    const level = Math.min(
      Math.max(1, options.priority ?? config.defaultPriorityLevel ?? config.priorityLevels),
      config.priorityLevels,
    );
    const refusal = refusalOf(this.#admissionState(), options, level);
    if (refusal) return Promise.reject(refusal);
    return new Promise<SubmitResult>((resolve, reject) => {
      this.#autoInForce?.arrived(options.shapeKey, this.#clock.now(), options.rows);
      this.#queue.enqueue(request, {
        rows: options.rows,
        shapeKey: options.shapeKey,
        level,
        timeoutUs: effectiveTimeoutUs(config.defaultTimeoutUs, options.timeoutUs),
        signal: options.signal,
        trace: options.trace,
        resolve,
        reject,
      });
      this.#queueMoved();
      this.#tick();
    });
  }

  /** Applies a new policy live; queued requests are batched under it from now on. */
  reconfigure(policy: BatchingPolicy): void {
    if (policy.priorityLevels !== this.#queue.priorityLevels) {
      throw new Error('priority levels cannot change on a live batcher');
    }
    this.#policy = this.#policyFor(policy);
    this.#tick();
  }

  /** Replaces the instances; retired ones finish their running batch and are not reused. */
  setRunners(runners: readonly BatchRunner[]): void {
    this.#pool.setRunners(runners);
    this.#tick();
  }

  /**
   * Resolves once nothing is queued or running: every admitted request has its answer.
   * Queued requests are dispatched without waiting out the queue delay.
   */
  drained(): Promise<void> {
    if (this.#queue.queuedRows === 0 && this.#pool.running === 0) return Promise.resolve();
    this.#flushing = true;
    const done = new Promise<void>((resolve) => this.#drainWaiters.push(resolve));
    this.#tick();
    return done;
  }

  /**
   * A batch of `rows` timed at load (as the batcher times its own, `batchCostMs`): the prior
   * of every shape's cost line, so `auto` can steer from the first request.
   */
  seedCost(rows: number, ms: number): void {
    this.#costs.seed(rows, ms);
  }

  /** The line the seeded batches alone make: what every shape starts from. */
  get seededFit(): CostFit {
    return this.#costs.seededFit;
  }

  /**
   * Runs `work` on an instance no batch uses meanwhile: it waits for one to be free, takes it
   * before any queued batch, and gives it back when `work` settles. For timing batches on a
   * model that is already serving.
   */
  exclusive<T>(work: (runner: BatchRunner) => Promise<T>): Promise<T> {
    return this.#pool.exclusive(work);
  }

  #policyFor(config: BatchingPolicy): BatchPolicy {
    if (config.adaptive === undefined) return new FixedDelayPolicy(config);
    const adaptive = { ...config, adaptive: config.adaptive };
    if (this.#auto) this.#auto.config = adaptive;
    else this.#auto = new AutoPolicy(adaptive, this.#costs, this.#observer);
    return this.#auto;
  }

  get #autoInForce(): AutoPolicy | undefined {
    return this.#policy === this.#auto ? this.#auto : undefined;
  }

  #admissionState(): AdmissionState {
    return {
      queue: this.#queue,
      pool: this.#pool,
      policy: this.#policy,
      flushing: this.#flushing,
      now: this.#clock.now(),
    };
  }

  /** Serves the groups, oldest first, while an instance is free; then queues ahead on busy ones; then arms the timer. */
  #tick(): void {
    this.#pool.serveExclusive();
    const now = this.#clock.now();
    let nextWake = Infinity;
    let groups = this.#queue.byAge();
    for (let index = 0; index < groups.length && this.#pool.idleCount > 0; index++) {
      const group = groups[index] as ShapeGroup;
      const decision = this.#policy.decide(this.#view(group, now, this.#pool.idleCount));
      if (decision.rows === 0) {
        nextWake = Math.min(nextWake, decision.lookAgainAt);
        continue;
      }
      this.#send(this.#pool.takeIdle() as BatchRunner, group, decision.rows);
      // The group may still hold a ready batch for another idle instance: the order may have changed.
      if (group.rows > 0 && this.#pool.idleCount > 0) {
        groups = this.#queue.byAge();
        index = -1;
        nextWake = Infinity;
      }
    }
    if (this.#pool.idleCount === 0) nextWake = Math.min(nextWake, this.#queueAhead(groups, now));
    this.#armWakeTimer(nextWake);
  }

  /**
   * With every instance busy, an instance that queues (BatchRunner.queuesBatches) and runs
   * just one batch gets the next one before it frees, so it starts the moment the running one
   * ends and the instance never waits for this thread between batches: a full batch at once;
   * any other once the instance is expected to free within a hand-over lead, formed by the
   * policy as if it had freed, at the time it is expected to. One batch per instance, so nothing waits behind another for
   * long. Returns when to look again for an instance about to free, or Infinity.
   */
  #queueAhead(groups: readonly ShapeGroup[], now: number): number {
    let nextWake = Infinity;
    for (const { runner, sendAt, freeAt } of this.#pool.queueable()) {
      for (const group of groups) {
        if (group.rows === 0) continue;
        let rows = fullBatchRows(this.#policy.config, group.rows, this.#flushing);
        // Judged as when it frees: the running batch's clients, due soon after, are worth waiting for.
        if (rows === 0 && now >= sendAt) rows = this.#policy.decide(this.#view(group, Math.max(now, freeAt), 1)).rows;
        if (rows === 0) continue;
        this.#send(runner, group, rows);
        break;
      }
      if (this.#pool.holdsOne(runner) && sendAt > now) nextWake = Math.min(nextWake, sendAt);
    }
    return nextWake;
  }

  #view(group: ShapeGroup, now: number, freeInstances: number): GroupView {
    return {
      shapeKey: group.key,
      rows: group.rows,
      oldestAt: group.oldest(),
      freeInstances,
      instances: this.#pool.size,
      now,
      flushing: this.#flushing,
    };
  }

  #send(runner: BatchRunner, group: ShapeGroup, targetRows: number): void {
    const batch = this.#queue.take(group, targetRows, this.#policy.config.maxBatchSize === 0);
    let rows = 0;
    for (const queued of batch) rows += queued.rows;
    this.#pool.runningRows += rows;
    this.#queueMoved();
    const endsAt = this.#pool.dispatch(runner, batch, rows, this.#costs.expectedMs(group.key, rows));
    this.#autoInForce?.dispatched(group.key, this.#clock.now(), rows, endsAt);
  }

  /** A batch came back: every policy's costs learn from it (the pool's expected free times need them); auto also counts its rows owed back. */
  #ran(shapeKey: string, rows: number, timings: BatchTimings, heldMs: number): void {
    this.#costs.learn(shapeKey, rows, batchCostMs(timings, heldMs), heldMs);
    this.#autoInForce?.answered(shapeKey, this.#clock.now(), rows);
  }

  #queueMoved(): void {
    this.#observer.queueChanged?.(this.#queue.queuedRows);
    this.#observer.pendingChanged?.(this.#queue.queuedRows + this.#pool.runningRows);
  }

  #armWakeTimer(at: number): void {
    if (at === this.#wakeAt) return;
    if (this.#wakeTimer !== undefined) this.#clock.clearTimeout(this.#wakeTimer);
    this.#wakeTimer = undefined;
    this.#wakeAt = at;
    if (at === Infinity) return;
    this.#wakeTimer = this.#clock.setTimeout(
      () => {
        this.#wakeTimer = undefined;
        this.#wakeAt = Infinity;
        this.#tick();
      },
      Math.max(0, at - this.#clock.now()),
    );
  }

  #notifyIfDrained(): void {
    if (this.#queue.queuedRows !== 0 || this.#pool.running !== 0) return;
    const waiters = this.#drainWaiters;
    this.#drainWaiters = [];
    this.#flushing = false;
    for (const resolve of waiters) resolve();
  }
}
