import type { ServerMetrics } from '../metrics/server-metrics.js';
import type { TrafficControl } from '../traffic/traffic-control.js';
import type { FinishedRequest, LoggedRequest, PredictionLogs } from './prediction-logging.js';

/** How one request to a model version ended, as the request itself saw it. */
export interface RequestOutcome extends FinishedRequest {
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
    metrics.requestFinished(model.name, model.version, status, seconds);
    traffic.requestFinished(model, status, seconds);
  };
}
