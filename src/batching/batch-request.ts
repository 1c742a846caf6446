import type { BatchTimings, HandlerRequest } from '../core/request.js';
import type { CostFit } from './cost-fit.js';

/** A model version's batching settings, as its config gives them. */
export interface BatchingPolicy {
  /** Most rows in one forward pass; 0 = the model does not batch (one request per pass). */
  readonly maxBatchSize: number;
  /** The fixed wait for a fuller batch; ignored when `adaptive` is set. */
  readonly maxQueueDelayUs: number;
  /**
   * `max_queue_delay: auto`: the wait follows the learnt cost and arrival rate (auto-policy.ts),
   * and a request that would be answered past `maxLatencyUs` is refused on arrival (admission.ts).
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

/** One request in the queue, from its arrival to its answer. */
export interface QueuedRequest {
  readonly request: HandlerRequest;
  readonly rows: number;
  /** Its shape group's key. */
  readonly shapeKey: string;
  /** The queue's clock, ms. */
  readonly enqueuedAt: number;
  /** Its priority level, 1 first. */
  readonly level: number;
  readonly trace: TracedSubmission | undefined;
  state: 'queued' | 'running' | 'done';
  timer: unknown;
  detach: (() => void) | undefined;
  resolve(result: SubmitResult): void;
  reject(error: unknown): void;
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
