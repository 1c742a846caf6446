import type { SubmitResult } from '../batching/batcher.js';
import { BatchserveError } from '../core/errors.js';
import type { Protocol, ServerMetrics } from '../metrics/server-metrics.js';
import type { LoadedModel } from '../repository/loaded-model.js';
import { statusOf } from './http.js';
import type { TrafficControl } from '../traffic/traffic-control.js';
import type { FinishedRequest, LoggedRequest, PredictionLogs } from './prediction-logging.js';

/** How one request to a model version ended, as the request itself saw it. */
export interface RequestOutcome extends FinishedRequest {
  readonly protocol: Protocol;
  /** Set when the prediction log took the request. */
  readonly logged: LoggedRequest | undefined;
}

/**
 * The one place a request's metrics and statistics are recorded: Prometheus counters and
 * histograms, the v2 statistics, the canary's judgement and the prediction log all read the
 * same outcome.
 */
export function outcomeRecorder(
  metrics: ServerMetrics,
  traffic: TrafficControl,
  logs: PredictionLogs,
): (outcome: RequestOutcome) => void {
  return (outcome) => {
    const { model, served, status, seconds, result, logged } = outcome;
    if (logged !== undefined) logs.record(outcome, logged);
    const totalNs = Math.round(seconds * 1e9);
    if (result) {
      const { timings, queueNs } = result;
      model.stats.recordSuccess({ queueNs, ...timings, totalNs });
      const computeNs = timings.computeInputNs + timings.computeInferNs + timings.computeOutputNs;
      metrics.requestTimings(model.name, model.version, queueNs / 1e9, computeNs / 1e9);
    } else {
      model.stats.recordFailure(totalNs);
    }
    if (!served) return;
    metrics.requestFinished(model.name, model.version, status, seconds, outcome.protocol);
    if (status === 503 && outcome.errorCode !== undefined) {
      metrics.requestRefused(model.name, model.version, outcome.errorCode);
    }
    traffic.requestFinished(model, status, seconds);
  };
}

/**
 * Runs one request's `work` and reports its outcome once, however it ends, for the version
 * `modelOf` names by then (none: the request never reached a version, nothing is recorded).
 */
export async function recordedRun(
  finished: (outcome: RequestOutcome) => void,
  protocol: Protocol,
  served: boolean,
  modelOf: () => LoadedModel | undefined,
  work: () => Promise<SubmitResult>,
  loggedOf: () => LoggedRequest | undefined,
): Promise<SubmitResult> {
  const started = process.hrtime.bigint();
  let result: SubmitResult | undefined;
  let status = 200;
  let errorCode: string | undefined;
  try {
    result = await work();
    return result;
  } catch (error) {
    status = statusOf(error);
    errorCode = error instanceof BatchserveError ? error.code : undefined;
    throw error;
  } finally {
    const model = modelOf();
    if (model) {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      finished({ model, served, status, seconds, result, errorCode, logged: loggedOf(), protocol });
    }
  }
}
