import type { SubmitResult } from '../batching/batcher.js';
import type { ServerMetrics } from '../metrics/server-metrics.js';
import type { LoadedModel } from '../repository/loaded-model.js';
import type { TrafficControl } from '../traffic/traffic-control.js';

/** How one request to a model version ended, as the request itself saw it. */
export interface RequestOutcome {
  readonly model: LoadedModel;
  /** False for a shadow's copy: it counts in the version's statistics, not in served traffic. */
  readonly served: boolean;
  /** The HTTP status it was (or, for a shadow, would have been) answered with. */
  readonly status: number;
  /** From its headers to its answer. */
  readonly seconds: number;
  /** Set when a forward pass answered it. */
  readonly result: SubmitResult | undefined;
}

/**
 * The one place a request's metrics and statistics are recorded: Prometheus counters and
 * histograms, the v2 statistics, and the canary's judgement all read the same outcome.
 */
export function outcomeRecorder(metrics: ServerMetrics, traffic: TrafficControl): (outcome: RequestOutcome) => void {
  return ({ model, served, status, seconds, result }) => {
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
