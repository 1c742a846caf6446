import {
  BatchTooLargeError,
  LatencyBudgetError,
  QueueFullError,
  QueueTimeoutError,
  RequestCancelledError,
} from '../core/errors.js';
import { batchAnswered, batchDispatched, requestQueued, traceNow } from '../core/trace-channels.js';
import { FixedQueue } from './fixed-queue.js';
import { realClock, type Clock } from './clock.js';
import type { BatchRunner } from './batch-runner.js';
import type { BatchTimings, HandlerRequest } from '../core/request.js';
import { adaptiveWaitMs, plannedMs } from './adaptive-delay.js';
import { ArrivalRate } from './arrival-rate.js';
import { OnlineCostFit, type CostFit } from './cost-fit.js';
import { batchMsOn, expectedCompletion, predictsCost } from './expected-completion.js';
import { Pace } from './pace.js';
import { ReturningRows } from './returning-rows.js';

export interface BatchingPolicy {
  /** Most rows in one forward pass; 0 = the model does not batch (one request per pass). */
  readonly maxBatchSize: number;
  /** The fixed wait for a fuller batch; ignored when `adaptive` is set. */
  readonly maxQueueDelayUs: number;
  /**
   * `max_queue_delay: auto`: the wait follows the learnt cost and arrival rate (adaptive-delay.ts),
   * and a request that would be answered past `maxLatencyUs` is refused on arrival (`#admit`).
   */
  readonly adaptive?: { readonly maxLatencyUs: number };
  readonly preferredBatchSizes: readonly number[];
  /** Queued rows beyond which requests are refused. */
  readonly maxQueueSize: number;
  /** 0 = requests wait as long as it takes. */
  readonly defaultTimeoutUs: number;
  readonly priorityLevels: number;
  /** A request that names no priority queues here; default: the last level. */
  readonly defaultPriorityLevel?: number;
}

export interface SubmitOptions {
  /** Rows this request adds to a batch (its first dimension). */
  readonly rows: number;
  /** Requests are stacked only with others of the same key (their non-batch dimensions). */
  readonly shapeKey: string;
  /** 1 is served first; default: the lowest level. */
  readonly priority?: number;
  /** May only shorten the policy's default timeout. */
  readonly timeoutUs?: number;
  /** Aborted when the client goes away: a queued request is dropped and never runs. */
  readonly signal?: AbortSignal;
  /** The place this request held while its body arrived; handed back as it is queued. */
  readonly reservation?: QueueReservation;
  /** Set for a traced request only: the batcher notes its queue and batch on it. */
  readonly trace?: TracedSubmission | undefined;
}

/**
 * What the batcher notes of a traced request, from which the inference call makes its queue,
 * batch and forward-pass spans. Times are trace-channels.ts's clock (epoch ms).
 */
export interface TracedSubmission {
  /** The request's span, opaque here: what the other requests of its batch link to. */
  readonly span: object;
  queuedAt: number;
  /** When its batch left for an instance. */
  dispatchedAt: number;
  /** The traced requests that rode in its batch, itself among them. */
  batch: readonly TracedSubmission[];
}

/** A place in the queue held for a request admitted on its headers, before its body is read. */
export interface QueueReservation {
  /** When it was made (the batcher's clock, ms): the request's time counts from here. */
  readonly heldSince: number;
  /** Gives the place back; later calls do nothing. */
  release(): void;
}

export interface SubmitResult {
  readonly response: unknown;
  readonly queueNs: number;
  readonly timings: BatchTimings;
  /** Rows in the forward pass that served this request. */
  readonly batchRows: number;
  readonly instanceId: string;
}

/** Hooks for metrics and statistics; called synchronously, so they must be cheap. */
export interface BatcherObserver {
  batchExecuted?(rows: number, timings: BatchTimings, instanceId: string): void;
  queueChanged?(queuedRows: number): void;
  /** Rows queued plus rows in a running batch: the autoscaling signal. */
  pendingChanged?(pendingRows: number): void;
  busyChanged?(busy: number, total: number): void;
  /** Adaptive batching refitted T(B) = c + m·B for a shape of requests (every few batches); `waitMs` is its latest wait. */
  fitChanged?(fit: CostFit, waitMs: number): void;
}

/** What the batcher learns of one shape of requests: its cost line, its arrival rate, the rows owed back. */
interface ShapeLearning {
  readonly fit: OnlineCostFit;
  readonly arrivals: ArrivalRate;
  readonly returning: ReturningRows;
  /** The wait last chosen for this shape, ms. */
  waitMs: number;
  /**
   * How much longer than the line recent batches held their instance, dispatch to answer (the
   * line is fit on compute time alone): the budget check needs what a batch costs the queue now.
   */
  readonly pace: Pace;
  /** The line last told to the observer: it hears of a refit, not of every batch. */
  reported: CostFit | undefined;
}

/** Shapes whose learning is kept; the least recently used goes past it. */
const LEARNED_SHAPES = 64;

interface Pending {
  readonly request: HandlerRequest;
  readonly rows: number;
  readonly group: ShapeGroup;
  readonly enqueuedAt: number;
  /** Its priority level, 1 first. */
  readonly level: number;
  /** When it was let in, its reservation's time if it had one (the batcher's clock, ms); NaN unless adaptive. */
  readonly admittedAt: number;
  /** Rows ahead of it then (adaptive): what the admission limit learns latency against. */
  readonly ahead: number;
  readonly trace: TracedSubmission | undefined;
  state: 'queued' | 'running' | 'done';
  timer: unknown;
  detach: (() => void) | undefined;
  resolve(result: SubmitResult): void;
  reject(error: unknown): void;
}

/** The queued requests that may share a batch: same shape, one FIFO per priority level. */
class ShapeGroup {
  readonly levels: FixedQueue<Pending>[];
  rows = 0;

  constructor(
    priorityLevels: number,
    readonly learning: ShapeLearning,
  ) {
    this.levels = Array.from({ length: priorityLevels }, () => new FixedQueue<Pending>());
  }

  /** Enqueue time of the oldest live request, dropping dead heads on the way. */
  oldest(): number {
    let oldest = Infinity;
    for (const level of this.levels) {
      while (level.peek()?.state === 'done') level.shift();
      const head = level.peek();
      if (head && head.enqueuedAt < oldest) oldest = head.enqueuedAt;
    }
    return oldest;
  }
}

/**
 * Dynamic batching for one model version. A group of same-shaped requests is dispatched
 * to a free instance when it reaches max_batch_size or a preferred size, or when its oldest
 * request has waited max_queue_delay — whichever comes first. With a delay of 0 it takes
 * whatever is queued when an instance frees, which still batches under load.
 */
export class Batcher {
  #policy: BatchingPolicy;
  #runners: BatchRunner[];
  readonly #idle: BatchRunner[];
  readonly #groups = new Map<string, ShapeGroup>();
  /** Outlives the groups, which go when empty: a shape's cost line is learnt over many batches. */
  readonly #learned = new Map<string, ShapeLearning>();
  #queuedRows = 0;
  /** Queued rows by priority level (index 0 is level 1): the rows a request queues behind. */
  readonly #queuedRowsAtLevel: Int32Array;
  /** Rows held for admitted requests still reading their bodies: one each, until they are queued. */
  #reservedRows = 0;
  #running = 0;
  #runningRows = 0;
  /** Batches sent to each busy runner and not answered yet: 1, or 2 where it queues (BatchRunner.queuesBatches). */
  readonly #inFlight = new Map<BatchRunner, number>();
  /** When each runner last answered a batch: a batch queued behind another starts then, not when it was sent. */
  readonly #answeredAt = new Map<BatchRunner, number>();
  /**
   * How long a batch sent to a free instance takes to start there, ms (the thread hop; an
   * average over about 8 batches): a batch for an instance about to free is sent that much
   * before it frees, so it starts the moment it does.
   */
  #handoverMs = 0;
  /** When each busy instance is expected to be free (adaptive, with a line that predicts): the budget check's start. */
  readonly #expectedFreeAt = new Map<BatchRunner, number>();
  /** #freeInNow's array: expectedCompletion works on it in place. */
  readonly #freeInScratch: number[] = [];
  /** The shape that last ran: whose line judges a request still reading its body. */
  #lastLearning: ShapeLearning | undefined;
  #wakeTimer: unknown;
  #wakeAt = Infinity;
  #drainWaiters: (() => void)[] = [];
  /** Work waiting for an instance of its own (`exclusive`), served before any batch. */
  #exclusiveWaiters: ((runner: BatchRunner) => void)[] = [];
  /** Batches timed at load (`seedCost`): every shape's cost line starts from them. */
  readonly #seeds: { rows: number; ms: number }[] = [];
  readonly #seedFit = new OnlineCostFit();
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
    this.#policy = policy;
    this.#runners = [...runners];
    this.#idle = [...runners];
    this.#queuedRowsAtLevel = new Int32Array(policy.priorityLevels);
  }

  get rowsQueued(): number {
    return this.#queuedRows;
  }

  /** Rows held for admitted requests whose bodies are still arriving. */
  get rowsReserved(): number {
    return this.#reservedRows;
  }

  get busyInstances(): number {
    return this.#runners.length - this.#idle.length;
  }

  get batchingPolicy(): BatchingPolicy {
    return this.#policy;
  }

  /**
   * Holds one row of queue space for a request whose body is still arriving, so a full queue
   * refuses it at its headers instead of after reading and decoding it. Its real row count,
   * known once decoded, is checked again by `submit`.
   */
  reserve(): QueueReservation {
    if (this.#queuedRows + this.#reservedRows + 1 > this.#policy.maxQueueSize) {
      throw new QueueFullError('Exceeds maximum queue size');
    }
    const refusal = this.#admit(this.#lastLearning, 1, 0);
    if (refusal instanceof LatencyBudgetError) throw refusal;
    this.#reservedRows += 1;
    let held = true;
    return {
      heldSince: this.#clock.now(),
      release: () => {
        if (!held) return;
        held = false;
        this.#reservedRows -= 1;
      },
    };
  }

  submit(request: HandlerRequest, options: SubmitOptions): Promise<SubmitResult> {
    options.reservation?.release();
    const policy = this.#policy;
    if (policy.maxBatchSize > 0 && options.rows > policy.maxBatchSize) {
      return Promise.reject(
        new BatchTooLargeError(
          `the request has ${options.rows} rows but max_batch_size is ${policy.maxBatchSize}; split it into smaller requests`,
        ),
      );
    }
    if (this.#queuedRows + this.#reservedRows + options.rows > policy.maxQueueSize) {
      return Promise.reject(new QueueFullError('Exceeds maximum queue size'));
    }
    if (options.signal?.aborted) return Promise.reject(new RequestCancelledError('the client went away'));
    const level = Math.min(
      Math.max(1, options.priority ?? policy.defaultPriorityLevel ?? policy.priorityLevels),
      policy.priorityLevels,
    );
    const ahead = this.#admit(
      this.#learned.get(options.shapeKey) ?? this.#lastLearning,
      options.rows,
      options.reservation ? this.#clock.now() - options.reservation.heldSince : 0,
      level,
    );
    if (ahead instanceof LatencyBudgetError) return Promise.reject(ahead);
    return new Promise<SubmitResult>((resolve, reject) => {
      const group = this.#groupFor(options.shapeKey);
      const now = this.#clock.now();
      if (policy.adaptive) {
        group.learning.arrivals.arrived(now, options.rows);
        group.learning.returning.arrived(now, options.rows);
      }
      const pending: Pending = {
        request,
        rows: options.rows,
        group,
        enqueuedAt: now,
        level,
        admittedAt: policy.adaptive ? (options.reservation?.heldSince ?? now) : NaN,
        ahead,
        trace: options.trace,
        state: 'queued',
        timer: undefined,
        detach: undefined,
        resolve,
        reject,
      };
      const timeoutUs = effectiveTimeoutUs(policy.defaultTimeoutUs, options.timeoutUs);
      if (timeoutUs > 0) {
        pending.timer = this.#clock.setTimeout(
          () => this.#dropQueued(pending, new QueueTimeoutError('Request timeout expired')),
          timeoutUs / 1000,
        );
      }
      if (options.signal) {
        const onAbort = (): void => this.#dropQueued(pending, new RequestCancelledError('the client went away'));
        options.signal.addEventListener('abort', onAbort, { once: true });
        pending.detach = () => options.signal?.removeEventListener('abort', onAbort);
      }
      group.levels[level - 1]?.push(pending);
      if (requestQueued.hasSubscribers) requestQueued.publish({ rows: options.rows, at: traceNow() });
      if (options.trace) options.trace.queuedAt = traceNow();
      group.rows += options.rows;
      this.#queuedRows += options.rows;
      (this.#queuedRowsAtLevel[level - 1] as number) += options.rows;
      this.#queueMoved();
      this.#schedule();
    });
  }

  /** Applies a new policy live; queued requests are batched under it from now on. */
  reconfigure(policy: BatchingPolicy): void {
    if (policy.priorityLevels !== this.#policy.priorityLevels) {
      throw new Error('priority levels cannot change on a live batcher');
    }
    this.#policy = policy;
    this.#schedule();
  }

  /** Replaces the instances; retired ones finish their running batch and are not reused. */
  setRunners(runners: readonly BatchRunner[]): void {
    const busy = new Set(this.#runners.filter((runner) => !this.#idle.includes(runner)));
    this.#runners = [...runners];
    this.#idle.length = 0;
    this.#idle.push(...runners.filter((runner) => !busy.has(runner)));
    this.#observer.busyChanged?.(this.busyInstances, this.#runners.length);
    this.#schedule();
  }

  /**
   * Resolves once nothing is queued or running: every admitted request has its answer.
   * Queued requests are dispatched without waiting out the queue delay.
   */
  drained(): Promise<void> {
    if (this.#queuedRows === 0 && this.#running === 0) return Promise.resolve();
    this.#flushing = true;
    const done = new Promise<void>((resolve) => this.#drainWaiters.push(resolve));
    this.#schedule();
    return done;
  }

  /**
   * A batch of `rows` timed at load (as the batcher times its own, `batchCostMs`):
   * the prior of every shape's cost line, so `max_queue_delay: auto` can steer from the first
   * request (cost-fit.ts keeps it for sizes live traffic has not run).
   */
  seedCost(rows: number, ms: number): void {
    this.#seeds.push({ rows, ms });
    this.#seedFit.seed(rows, ms);
    for (const learning of this.#learned.values()) learning.fit.seed(rows, ms);
  }

  /** The line the seeded batches alone make: what every shape starts from. */
  get seededFit(): CostFit {
    return this.#seedFit.current();
  }

  /**
   * Runs `work` on an instance no batch uses meanwhile: it waits for one to be free, takes it
   * before any queued batch, and gives it back when `work` settles. For timing batches on a
   * model that is already serving.
   */
  async exclusive<T>(work: (runner: BatchRunner) => Promise<T>): Promise<T> {
    const runner = await new Promise<BatchRunner>((resolve) => {
      this.#exclusiveWaiters.push(resolve);
      this.#schedule();
    });
    this.#running += 1;
    try {
      return await work(runner);
    } finally {
      this.#running -= 1;
      if (this.#runners.includes(runner)) this.#idle.push(runner);
      this.#notifyIfDrained();
      this.#schedule();
    }
  }

  #groupFor(shapeKey: string): ShapeGroup {
    let group = this.#groups.get(shapeKey);
    if (!group) {
      group = new ShapeGroup(this.#policy.priorityLevels, this.#learningFor(shapeKey));
      this.#groups.set(shapeKey, group);
    }
    return group;
  }

  #learningFor(shapeKey: string): ShapeLearning {
    let learning = this.#learned.get(shapeKey);
    if (learning) {
      // Most recently used last, so the first key is the one to forget.
      this.#learned.delete(shapeKey);
    } else {
      learning = {
        fit: new OnlineCostFit(),
        arrivals: new ArrivalRate(),
        returning: new ReturningRows(),
        waitMs: 0,
        pace: new Pace(),
        reported: undefined,
      };
      for (const { rows, ms } of this.#seeds) learning.fit.seed(rows, ms);
      if (this.#learned.size >= LEARNED_SHAPES) this.#learned.delete(this.#learned.keys().next().value as string);
    }
    this.#learned.set(shapeKey, learning);
    return learning;
  }

  /**
   * `max_queue_delay: auto` refuses a request now (503 BS_ERR_LATENCY_BUDGET) only when it
   * cannot be answered in time: the rows queued and reserved ahead of it, then its own, in
   * batches on the instances as they free, at the learnt T(B) scaled by how long recent
   * batches held their instance against it (expected-completion.ts, `ShapeLearning.pace`),
   * counted from the request's reservation when it had one (`spentMs`: its body's read and
   * decode), would end past `max_latency`. A request that would run at once is never refused,
   * nor one the line cannot predict. It queues behind the rows of its own priority level and
   * those before it (`level`; a reservation, whose priority is not read yet, behind all of
   * them), and behind every reservation. Returns the rows ahead of it, or the refusal.
   */
  #admit(
    learning: ShapeLearning | undefined,
    rows: number,
    spentMs: number,
    level = this.#policy.priorityLevels,
  ): number | LatencyBudgetError {
    const { adaptive, maxBatchSize } = this.#policy;
    if (adaptive === undefined || this.#flushing) return 0;
    let queuedAhead = this.#reservedRows;
    for (let index = 0; index < level; index++) queuedAhead += this.#queuedRowsAtLevel[index] as number;
    const ahead = queuedAhead + this.#runningRows;
    // One that would run at once is as early as it can be: refusing it would help nobody.
    if (queuedAhead === 0 && this.#idle.length > 0) return ahead;
    const line = learning?.fit.current();
    if (learning === undefined || line === undefined || !predictsCost(line)) return ahead;
    const budgetMs = adaptive.maxLatencyUs / 1000 - spentMs;
    const endMs = expectedCompletion({
      rowsThrough: queuedAhead + rows,
      maxBatchSize,
      freeInMs: this.#freeInNow(this.#clock.now()),
      fit: line,
      pace: learning.pace.value,
      limitMs: budgetMs,
    });
    if (endMs <= budgetMs) return ahead;
    return this.#refusal(
      `expected to finish in ${ms(spentMs + endMs)} ms, past max_latency ${ms(adaptive.maxLatencyUs / 1000)} ms`,
      queuedAhead,
    );
  }

  /** For each instance, ms until it is expected to be free (0 when idle), in one array reused by every admission. */
  #freeInNow(now: number): number[] {
    const freeIn = this.#freeInScratch;
    freeIn.length = 0;
    for (const runner of this.#runners) freeIn.push(Math.max(0, (this.#expectedFreeAt.get(runner) ?? now) - now));
    return freeIn;
  }

  #refusal(why: string, queuedAhead: number): LatencyBudgetError {
    const instances = this.#runners.length;
    return new LatencyBudgetError(
      `${why} (${queuedAhead} rows queued ahead on ${instances} instance${instances === 1 ? '' : 's'}); try again shortly`,
    );
  }

  #dropQueued(pending: Pending, reason: Error): void {
    if (pending.state !== 'queued') return;
    this.#settle(pending);
    this.#queuedRows -= pending.rows;
    (this.#queuedRowsAtLevel[pending.level - 1] as number) -= pending.rows;
    pending.group.rows -= pending.rows;
    this.#queueMoved();
    pending.reject(reason);
    this.#notifyIfDrained();
    this.#schedule();
  }

  /** Marks a request as leaving the queue for good: no timer or abort may touch it again. */
  #settle(pending: Pending): void {
    pending.state = pending.state === 'queued' ? 'done' : pending.state;
    if (pending.timer !== undefined) this.#clock.clearTimeout(pending.timer);
    pending.detach?.();
  }

  #schedule(): void {
    while (this.#exclusiveWaiters.length > 0 && this.#idle.length > 0) {
      (this.#exclusiveWaiters.shift() as (runner: BatchRunner) => void)(this.#idle.shift() as BatchRunner);
    }
    const now = this.#clock.now();
    let nextWake = Infinity;
    const groups = [...this.#groups.entries()]
      .map(([key, group]) => ({ key, group, oldest: group.oldest() }))
      .filter(({ group, oldest }) => group.rows > 0 && oldest !== Infinity)
      .sort((a, b) => a.oldest - b.oldest);
    for (const { key, group, oldest } of groups) {
      if (this.#idle.length === 0) break;
      const target = this.#readyBatchRows(group, now - oldest, now);
      if (target === 0) {
        nextWake = Math.min(
          nextWake,
          this.#policy.adaptive ? now + group.learning.waitMs : oldest + this.#policy.maxQueueDelayUs / 1000,
        );
        continue;
      }
      this.#dispatch(this.#idle.shift() as BatchRunner, this.#takeBatch(group, target));
      if (group.rows === 0) this.#groups.delete(key);
      // The group may still hold a ready batch for another idle instance.
      if (group.rows > 0 && this.#idle.length > 0) {
        this.#schedule();
        return;
      }
    }
    if (this.#idle.length === 0) nextWake = Math.min(nextWake, this.#queueAhead(groups, now));
    this.#armWakeTimer(nextWake);
  }

  /**
   * With every instance busy, an instance that queues (BatchRunner.queuesBatches) and runs
   * just one batch gets the next one before it frees, so it starts the moment the running one
   * ends and the instance never waits for this thread between batches, however busy answering
   * the last one keeps it: a full batch (max_batch_size, or a preferred size, reached: waiting
   * could not make it fuller) at once; any other once the instance is expected to free within
   * two hand-overs (its cost line's T(B), `#handoverMs`), formed by the policy as if it had
   * freed. One batch per instance, so nothing waits behind another for long. Returns when to
   * look again for an instance about to free, or Infinity.
   */
  #queueAhead(groups: readonly { key: string; group: ShapeGroup; oldest: number }[], now: number): number {
    let nextWake = Infinity;
    for (const runner of this.#runners) {
      if (!runner.queuesBatches || this.#inFlight.get(runner) !== 1) continue;
      const sendAt = (this.#expectedFreeAt.get(runner) ?? Infinity) - 2 * this.#handoverMs;
      for (const { key, group, oldest } of groups) {
        if (group.rows === 0) continue;
        let target = this.#fullBatchRows(group);
        if (target === 0 && now >= sendAt) target = this.#readyBatchRows(group, now - oldest, now, 1);
        if (target === 0) continue;
        this.#dispatch(runner, this.#takeBatch(group, target));
        if (group.rows === 0) this.#groups.delete(key);
        break;
      }
      if (this.#inFlight.get(runner) === 1 && sendAt > now) nextWake = Math.min(nextWake, sendAt);
    }
    return nextWake;
  }

  /** The rows of a batch waiting cannot make fuller (max_batch_size, or the largest preferred size reached), or 0. */
  #fullBatchRows(group: ShapeGroup): number {
    const { maxBatchSize, preferredBatchSizes } = this.#policy;
    if (group.rows === 0) return 0;
    if (maxBatchSize === 0) return 1;
    if (group.rows >= maxBatchSize || this.#flushing) return Math.min(group.rows, maxBatchSize);
    let preferred = 0;
    for (const size of preferredBatchSizes) if (size <= group.rows && size > preferred) preferred = size;
    return preferred;
  }

  /**
   * How many rows to take now, or 0 to keep waiting: a full batch, else the largest preferred
   * size reached, else everything that fits once the oldest request's delay has run out (or,
   * adaptive, once waiting for the next row no longer pays).
   */
  #readyBatchRows(group: ShapeGroup, oldestWaitMs: number, now: number, freeInstances = this.#idle.length): number {
    const { maxBatchSize, preferredBatchSizes, maxQueueDelayUs, adaptive } = this.#policy;
    const queuedRows = group.rows;
    if (maxBatchSize === 0) return 1;
    if (queuedRows >= maxBatchSize) return maxBatchSize;
    let preferred = 0;
    for (const size of preferredBatchSizes) if (size <= queuedRows && size > preferred) preferred = size;
    if (preferred > 0) return preferred;
    if (this.#flushing) return maxBatchSize;
    if (adaptive === undefined) return oldestWaitMs * 1000 >= maxQueueDelayUs ? maxBatchSize : 0;
    const { learning } = group;
    learning.waitMs = adaptiveWaitMs({
      queuedRows,
      maxBatchSize,
      freeInstances,
      oldestWaitMs,
      gapMs: learning.arrivals.expectedGapMs(now),
      returningRows: learning.returning.owedRows(now),
      returningInMs: learning.returning.dueInMs(now),
      maxLatencyMs: plannedMs(adaptive.maxLatencyUs),
      fit: learning.fit.current(),
      pace: learning.pace.value,
    });
    return learning.waitMs > 0 ? 0 : maxBatchSize;
  }

  /** Takes requests in priority, then arrival, order while they fit in `targetRows`. */
  #takeBatch(group: ShapeGroup, targetRows: number): Pending[] {
    const batch: Pending[] = [];
    let rows = 0;
    for (const level of group.levels) {
      for (;;) {
        const head = level.peek();
        if (!head) break;
        if (head.state === 'done') {
          level.shift();
          continue;
        }
        if (batch.length > 0 && rows + head.rows > targetRows) break;
        level.shift();
        batch.push(head);
        rows += head.rows;
        (this.#queuedRowsAtLevel[head.level - 1] as number) -= head.rows;
        if (this.#policy.maxBatchSize === 0) break;
      }
      if (rows >= targetRows || (this.#policy.maxBatchSize === 0 && batch.length > 0)) break;
    }
    group.rows -= rows;
    this.#queuedRows -= rows;
    // Dispatched at once: the rows move from the queue into a running batch.
    this.#runningRows += rows;
    this.#queueMoved();
    return batch;
  }

  #dispatch(runner: BatchRunner, batch: Pending[]): void {
    const dispatchedAt = this.#clock.now();
    let rows = 0;
    let traced: TracedSubmission[] | undefined;
    for (const pending of batch) {
      this.#settle(pending);
      pending.state = 'running';
      rows += pending.rows;
      if (pending.trace) (traced ??= []).push(pending.trace);
    }
    const learning = (batch[0] as Pending).group.learning;
    if (this.#policy.adaptive) this.#lastLearning = learning;
    const fit = learning.fit.current();
    if (predictsCost(fit)) {
      // Queued behind a running batch, it frees the instance that much later.
      const from = Math.max(dispatchedAt, this.#expectedFreeAt.get(runner) ?? dispatchedAt);
      this.#expectedFreeAt.set(runner, from + learning.pace.value * batchMsOn(fit, rows));
    }
    const sentAt = traceNow();
    if (traced) {
      for (const trace of traced) {
        trace.dispatchedAt = sentAt;
        trace.batch = traced;
      }
    }
    this.#running += 1;
    const toFree = !this.#inFlight.has(runner);
    if (batchDispatched.hasSubscribers) {
      batchDispatched.publish({ instance: runner.id, rows, at: sentAt, queuedBehind: !toFree });
    }
    this.#inFlight.set(runner, (this.#inFlight.get(runner) ?? 0) + 1);
    this.#observer.busyChanged?.(this.busyInstances, this.#runners.length);
    void this.#execute(runner, batch, dispatchedAt, rows, toFree ? sentAt : undefined).finally(() =>
      this.#notifyIfDrained(),
    );
  }

  /**
   * A batch's instance is done with it: its rows leave the running count and, when nothing else
   * is queued on it, the instance is free. Called before the batch's requests are answered, so
   * the next batch is on its way to the instance while this thread writes those answers.
   */
  #free(runner: BatchRunner, rows: number): void {
    this.#running -= 1;
    this.#runningRows -= rows;
    this.#answeredAt.set(runner, this.#clock.now());
    const left = (this.#inFlight.get(runner) ?? 1) - 1;
    if (left > 0) this.#inFlight.set(runner, left);
    else {
      this.#inFlight.delete(runner);
      this.#expectedFreeAt.delete(runner);
      if (this.#runners.includes(runner)) this.#idle.push(runner);
    }
    this.#observer.pendingChanged?.(this.#queuedRows + this.#runningRows);
    this.#observer.busyChanged?.(this.busyInstances, this.#runners.length);
    this.#schedule();
  }

  /** `sentAt` (trace-channels.ts's clock): when the batch left for an instance that was free, to learn the hand-over. */
  async #execute(
    runner: BatchRunner,
    batch: readonly Pending[],
    dispatchedAt: number,
    rows: number,
    sentAt: number | undefined,
  ): Promise<void> {
    let result;
    try {
      result = await runner.run(batch.map((pending) => pending.request));
    } catch (error) {
      await this.#runAlone(runner, batch, error, dispatchedAt);
      this.#free(runner, rows);
      return;
    }
    const now = this.#clock.now();
    // How long the batch held its instance: from when it could start there, behind any batch before it.
    const roundTripMs = now - Math.max(dispatchedAt, this.#answeredAt.get(runner) ?? dispatchedAt);
    const { responses, timings } = result;
    if (sentAt !== undefined && timings.startedAt !== undefined) {
      const handover = Math.max(0, timings.startedAt - sentAt);
      this.#handoverMs += (handover - this.#handoverMs) / 8;
    }
    this.#learnCost((batch[0] as Pending).group.learning, rows, batchCostMs(timings, roundTripMs), roundTripMs);
    this.#observer.batchExecuted?.(rows, timings, runner.id);
    if (batchAnswered.hasSubscribers) {
      const computeMs = (timings.computeInputNs + timings.computeInferNs + timings.computeOutputNs) / 1e6;
      batchAnswered.publish({ instance: runner.id, rows, at: traceNow(), startedAt: timings.startedAt, computeMs });
    }
    this.#free(runner, rows);
    batch.forEach((pending, index) =>
      this.#finish(
        pending,
        { response: responses[index], timings, batchRows: rows, instanceId: runner.id },
        dispatchedAt,
      ),
    );
  }

  /** One bad request must not fail its batch-mates: each runs alone, so only it fails. */
  async #runAlone(runner: BatchRunner, batch: readonly Pending[], error: unknown, dispatchedAt: number): Promise<void> {
    if (batch.length === 1) {
      (batch[0] as Pending).state = 'done';
      (batch[0] as Pending).reject(error);
      return;
    }
    for (const pending of batch) {
      try {
        const { responses, timings } = await runner.run([pending.request]);
        this.#observer.batchExecuted?.(pending.rows, timings, runner.id);
        this.#finish(
          pending,
          { response: responses[0], timings, batchRows: pending.rows, instanceId: runner.id },
          dispatchedAt,
        );
      } catch (soloError) {
        pending.state = 'done';
        pending.reject(soloError);
      }
    }
  }

  /**
   * Feeds the shape's cost line with a batch's cost, its pace with how long the batch held its
   * instance (`roundTripMs`, dispatch to answer), and owes its rows back (a closed loop's
   * clients return with them).
   */
  #learnCost(learning: ShapeLearning, rows: number, ms: number, roundTripMs: number): void {
    const line = learning.fit.current();
    if (predictsCost(line)) learning.pace.observe(roundTripMs, batchMsOn(line, rows));
    learning.fit.add(rows, ms);
    // Every policy learns the line: it says when an instance will free (#queueAhead).
    if (this.#policy.adaptive === undefined) return;
    learning.returning.answered(this.#clock.now(), rows);
    const fit = learning.fit.current();
    if (fit === learning.reported) return;
    learning.reported = fit;
    this.#observer.fitChanged?.(fit, learning.waitMs);
  }

  /** A runner answers one request of a batch with an Error (a pipeline step failed it): that request fails alone. */
  #finish(pending: Pending, result: Omit<SubmitResult, 'queueNs'>, dispatchedAt: number): void {
    pending.state = 'done';
    if (result.response instanceof Error) {
      pending.reject(result.response);
      return;
    }
    pending.resolve({ ...result, queueNs: Math.round((dispatchedAt - pending.enqueuedAt) * 1e6) });
  }

  #queueMoved(): void {
    this.#observer.queueChanged?.(this.#queuedRows);
    this.#observer.pendingChanged?.(this.#queuedRows + this.#runningRows);
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
        this.#schedule();
      },
      Math.max(0, at - this.#clock.now()),
    );
  }

  #notifyIfDrained(): void {
    if (this.#queuedRows !== 0 || this.#running !== 0) return;
    const waiters = this.#drainWaiters;
    this.#drainWaiters = [];
    this.#flushing = false;
    for (const resolve of waiters) resolve();
  }
}

/**
 * What a batch cost the instance, ms: its compute time (preprocess, forward pass, postprocess,
 * as the instance timed them), else its round trip. Not the round trip when compute is known:
 * on a worker thread that also holds the main thread's wait to pick the answer up, which under
 * many connections is noise that does not grow with the batch and would sink the fit's R².
 */
export function batchCostMs(timings: BatchTimings, roundTripMs: number): number {
  const computeNs = timings.computeInputNs + timings.computeInferNs + timings.computeOutputNs;
  return computeNs > 0 ? computeNs / 1e6 : roundTripMs;
}

/** A request's timeout, µs: its own may only shorten the model's default; 0 = none. */
export function effectiveTimeoutUs(defaultUs: number, requestedUs: number | undefined): number {
  if (requestedUs === undefined || requestedUs <= 0) return defaultUs;
  return defaultUs > 0 ? Math.min(defaultUs, requestedUs) : requestedUs;
}

/** Milliseconds for a message: two significant figures below 100 (0.8, 8.5, 21), whole ones above. */
function ms(value: number): number {
  return value < 100 ? Number(value.toPrecision(2)) : Math.round(value);
}
