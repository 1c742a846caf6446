import { QueueTimeoutError, RequestCancelledError } from '../core/errors.js';
import type { HandlerRequest } from '../core/request.js';
import { requestQueued, traceNow } from '../core/trace-channels.js';
import type { QueueReservation, QueuedRequest, SubmitResult, TracedSubmission } from './batch-request.js';
import type { Clock } from './clock.js';
import { FixedQueue } from './fixed-queue.js';

/** The queued requests that may share a batch: same shape, one FIFO per priority level. */
export class ShapeGroup {
  readonly levels: FixedQueue<QueuedRequest>[];
  rows = 0;

  constructor(
    readonly key: string,
    priorityLevels: number,
  ) {
    this.levels = Array.from({ length: priorityLevels }, () => new FixedQueue<QueuedRequest>());
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

/** What a queued request needs besides its data. */
export interface Enqueued {
  readonly rows: number;
  readonly shapeKey: string;
  readonly level: number;
  /** µs; 0 = none. */
  readonly timeoutUs: number;
  readonly signal: AbortSignal | undefined;
  readonly trace: TracedSubmission | undefined;
  readonly resolve: (result: SubmitResult) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * The requests waiting for a batch: grouped by shape, a FIFO per priority level in each group,
 * with row counts by level, places held for requests still reading their bodies, and each
 * request's timeout and cancellation. It knows no policy: the batcher asks it what is queued,
 * and takes batches of the sizes a policy chose. `left` hears of a request leaving on its own
 * (timed out, cancelled), after it is rejected.
 */
export class RequestQueue {
  readonly #groups = new Map<string, ShapeGroup>();
  /** #byAge's array, reused. */
  readonly #live: ShapeGroup[] = [];
  #queuedRows = 0;
  /** Queued rows by priority level (index 0 is level 1): the rows a request queues behind. */
  readonly #rowsAtLevel: Int32Array;
  /** Rows held for admitted requests still reading their bodies: one each, until they are queued. */
  #reservedRows = 0;

  constructor(
    priorityLevels: number,
    private readonly clock: Clock,
    private readonly left: () => void,
  ) {
    this.#rowsAtLevel = new Int32Array(priorityLevels);
  }

  get priorityLevels(): number {
    return this.#rowsAtLevel.length;
  }

  get queuedRows(): number {
    return this.#queuedRows;
  }

  get reservedRows(): number {
    return this.#reservedRows;
  }

  /** Rows a request at `level` queues behind: every reservation, and the queued rows of its level and those before it. */
  rowsAhead(level: number): number {
    let ahead = this.#reservedRows;
    for (let index = 0; index < level; index++) ahead += this.#rowsAtLevel[index] as number;
    return ahead;
  }

  /** Holds one row for a request whose body is still arriving. */
  hold(): QueueReservation {
    this.#reservedRows += 1;
    let held = true;
    return {
      heldSince: this.clock.now(),
      release: () => {
        if (!held) return;
        held = false;
        this.#reservedRows -= 1;
      },
    };
  }

  enqueue(request: HandlerRequest, entry: Enqueued): QueuedRequest {
    let group = this.#groups.get(entry.shapeKey);
    if (!group) {
      group = new ShapeGroup(entry.shapeKey, this.#rowsAtLevel.length);
      this.#groups.set(entry.shapeKey, group);
    }
    const queued: QueuedRequest = {
      request,
      rows: entry.rows,
      shapeKey: entry.shapeKey,
      enqueuedAt: this.clock.now(),
      level: entry.level,
      trace: entry.trace,
      state: 'queued',
      timer: undefined,
      detach: undefined,
      resolve: entry.resolve,
      reject: entry.reject,
    };
    if (entry.timeoutUs > 0) {
      queued.timer = this.clock.setTimeout(
        () => this.#drop(queued, new QueueTimeoutError('Request timeout expired')),
        entry.timeoutUs / 1000,
      );
    }
    const { signal } = entry;
    if (signal) {
      const onAbort = (): void => this.#drop(queued, new RequestCancelledError('the client went away'));
      signal.addEventListener('abort', onAbort, { once: true });
      queued.detach = () => signal.removeEventListener('abort', onAbort);
    }
    group.levels[entry.level - 1]?.push(queued);
    if (requestQueued.hasSubscribers) requestQueued.publish({ rows: entry.rows, at: traceNow() });
    if (entry.trace) entry.trace.queuedAt = traceNow();
    group.rows += entry.rows;
    this.#queuedRows += entry.rows;
    (this.#rowsAtLevel[entry.level - 1] as number) += entry.rows;
    return queued;
  }

  /**
   * The groups with live requests, the one whose oldest request is oldest first: the order they
   * are served in. The array is reused by the next call.
   */
  byAge(): readonly ShapeGroup[] {
    const live = this.#live;
    live.length = 0;
    for (const [key, group] of this.#groups) {
      if (group.rows > 0 && group.oldest() !== Infinity) live.push(group);
      else if (group.rows === 0) this.#groups.delete(key);
    }
    if (live.length > 1) live.sort((a, b) => a.oldest() - b.oldest());
    return live;
  }

  /**
   * Takes requests in priority, then arrival, order while they fit in `targetRows` (one request
   * alone when `oneRequest`: a model that does not batch). Each leaves the queue for good.
   */
  take(group: ShapeGroup, targetRows: number, oneRequest: boolean): QueuedRequest[] {
    const batch: QueuedRequest[] = [];
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
        this.#settle(head);
        head.state = 'running';
        batch.push(head);
        rows += head.rows;
        (this.#rowsAtLevel[head.level - 1] as number) -= head.rows;
        if (oneRequest) break;
      }
      if (rows >= targetRows || (oneRequest && batch.length > 0)) break;
    }
    group.rows -= rows;
    this.#queuedRows -= rows;
    if (group.rows === 0) this.#groups.delete(group.key);
    return batch;
  }

  #drop(queued: QueuedRequest, reason: Error): void {
    if (queued.state !== 'queued') return;
    this.#settle(queued);
    queued.state = 'done';
    this.#queuedRows -= queued.rows;
    (this.#rowsAtLevel[queued.level - 1] as number) -= queued.rows;
    const group = this.#groups.get(queued.shapeKey);
    if (group) group.rows -= queued.rows;
    queued.reject(reason);
    this.left();
  }

  /** No timer or abort may touch a request that leaves the queue. */
  #settle(queued: QueuedRequest): void {
    if (queued.timer !== undefined) this.clock.clearTimeout(queued.timer);
    queued.detach?.();
  }
}
