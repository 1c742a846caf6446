import { BatchTooLargeError, QueueFullError, RequestCancelledError, type LatencyBudgetError } from '../core/errors.js';
import type { BatchPolicy } from './batch-policy.js';
import type { SubmitOptions } from './batch-request.js';
import type { InstancePool } from './instance-pool.js';
import type { RequestQueue } from './request-queue.js';

/** What a request is judged against: the queue, the instances, and the policy in force. */
export interface AdmissionState {
  readonly queue: RequestQueue;
  readonly pool: InstancePool;
  readonly policy: BatchPolicy;
  /** Draining: everything queued goes at once, so no budget applies. */
  readonly flushing: boolean;
  readonly now: number;
}

/**
 * Whether a request may join the queue, and the error that refuses it: too many rows for one
 * batch, no room in the queue (queued plus reserved rows), its client already gone, or, under
 * `auto`, an answer the policy expects past `max_latency`. Returns undefined to admit.
 */
export function refusalOf(
  state: AdmissionState,
  options: SubmitOptions,
  level: number,
): BatchTooLargeError | QueueFullError | RequestCancelledError | LatencyBudgetError | undefined {
  const { maxBatchSize, maxQueueSize } = state.policy.config;
  if (maxBatchSize > 0 && options.rows > maxBatchSize) {
    return new BatchTooLargeError(
      `the request has ${options.rows} rows but max_batch_size is ${maxBatchSize}; split it into smaller requests`,
    );
  }
  if (state.queue.queuedRows + state.queue.reservedRows + options.rows > maxQueueSize) {
    return new QueueFullError('Exceeds maximum queue size');
  }
  if (options.signal?.aborted) return new RequestCancelledError('the client went away');
  const spentMs = options.reservation ? state.now - options.reservation.heldSince : 0;
  return budgetRefusal(state, options.shapeKey, options.rows, spentMs, level);
}

/** Whether a place may be held for a request whose body is still arriving (one row, at the lowest priority). */
export function reservationRefusal(state: AdmissionState): QueueFullError | LatencyBudgetError | undefined {
  if (state.queue.queuedRows + state.queue.reservedRows + 1 > state.policy.config.maxQueueSize) {
    return new QueueFullError('Exceeds maximum queue size');
  }
  return budgetRefusal(state, undefined, 1, 0, state.queue.priorityLevels);
}

/**
 * The latency budget, asked of the policy (only `auto` has one). A request queues behind the
 * rows of its own priority level and those before it (a reservation, whose priority is not
 * read yet, behind all of them) and behind every reservation. One that would run at once is
 * as early as it can be: refusing it would help nobody.
 */
function budgetRefusal(
  state: AdmissionState,
  shapeKey: string | undefined,
  rows: number,
  spentMs: number,
  level: number,
): LatencyBudgetError | undefined {
  const { policy } = state;
  if (policy.latencyRefusal === undefined || state.flushing) return undefined;
  const rowsAhead = state.queue.rowsAhead(level);
  if (rowsAhead === 0 && state.pool.idleCount > 0) return undefined;
  return policy.latencyRefusal({ shapeKey, rowsAhead, rows, spentMs, freeInMs: state.pool.freeInMs(state.now) });
}
