import type { LatencyBudgetError } from '../core/errors.js';
import type { BatchingPolicy } from './batch-request.js';

/** What a policy is shown of one shape group when an instance could take it. */
export interface GroupView {
  readonly shapeKey: string;
  /** Rows queued in the group. */
  readonly rows: number;
  /** When its oldest request was queued (the batcher's clock, ms). */
  readonly oldestAt: number;
  /** Instances free now, the one asking included. */
  readonly freeInstances: number;
  /** Instances serving the group, free or busy. */
  readonly instances: number;
  /** The batcher's clock, ms. */
  readonly now: number;
  /** Draining: nothing may wait for a fuller batch. */
  readonly flushing: boolean;
}

/** A policy's answer: take `rows` now, or (rows 0) look again at `lookAgainAt` (the batcher's clock, ms; Infinity: on the next event). */
export interface Decision {
  readonly rows: number;
  readonly lookAgainAt: number;
}

/**
 * Decides when queued requests become a batch, as Triton's dynamic batcher does beside its
 * backends: it is shown the queue and the instances and runs nothing itself.
 */
export interface BatchPolicy {
  readonly config: BatchingPolicy;
  decide(group: GroupView): Decision;
  /** A policy with a latency budget refuses, on arrival, a request it expects to answer past it (admission.ts asks). */
  latencyRefusal?(question: BudgetQuestion): LatencyBudgetError | undefined;
}

/** What admission knows when it asks a policy whether a request can still be answered in time. */
export interface BudgetQuestion {
  /** The request's shape; undefined for a reservation, whose body is not read yet. */
  readonly shapeKey: string | undefined;
  /** Rows that run before it (queued at its level and before, and reserved). */
  readonly rowsAhead: number;
  readonly rows: number;
  /** Time it already spent reading its body, ms. */
  readonly spentMs: number;
  /** For each instance, ms until it is expected free (0 when idle): worked on in place. */
  readonly freeInMs: number[];
}

/**
 * The rows of a batch that waiting could not make fuller, or 0: one request for a model that
 * does not batch; max_batch_size once that many are queued (or while draining); else the
 * largest preferred size reached. Every policy takes these at once.
 */
export function fullBatchRows(config: BatchingPolicy, queuedRows: number, flushing: boolean): number {
  const { maxBatchSize, preferredBatchSizes } = config;
  if (queuedRows === 0) return 0;
  if (maxBatchSize === 0) return 1;
  if (queuedRows >= maxBatchSize) return maxBatchSize;
  let preferred = 0;
  for (const size of preferredBatchSizes) if (size <= queuedRows && size > preferred) preferred = size;
  if (preferred > 0) return preferred;
  return flushing ? maxBatchSize : 0;
}

/**
 * Triton's rules, learning nothing: a group goes when it fills max_batch_size or reaches a
 * preferred size, or when its oldest request has waited max_queue_delay — whichever comes
 * first. With a delay of 0 it takes whatever is queued when an instance frees, which still
 * batches under load.
 */
export class FixedDelayPolicy implements BatchPolicy {
  constructor(readonly config: BatchingPolicy) {}

  decide(group: GroupView): Decision {
    const full = fullBatchRows(this.config, group.rows, group.flushing);
    if (full > 0) return { rows: full, lookAgainAt: Infinity };
    const { maxQueueDelayUs, maxBatchSize } = this.config;
    if ((group.now - group.oldestAt) * 1000 >= maxQueueDelayUs) return { rows: maxBatchSize, lookAgainAt: Infinity };
    return { rows: 0, lookAgainAt: group.oldestAt + maxQueueDelayUs / 1000 };
  }
}
