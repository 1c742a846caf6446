import type { JoinedPrediction } from './join.js';

export const EXPERIMENT_METRICS = ['reward', 'accuracy', 'latency', 'error-rate'] as const;
export type ExperimentMetric = (typeof EXPERIMENT_METRICS)[number];

/** One measurement of the metric, at the time of the prediction it belongs to. */
export interface Observation {
  readonly time: number;
  readonly value: number;
}

export interface MetricObservations {
  readonly metric: ExperimentMetric;
  /** A rate is a share of 0/1 outcomes (two-proportion z-test); a mean is an average (Welch's t-test). */
  readonly kind: 'rate' | 'mean';
  readonly higherIsBetter: boolean;
  /** Every version with served predictions, even one without observations, in the order read. */
  readonly byVersion: ReadonlyMap<string, readonly Observation[]>;
}

/**
 * The metric's observations per version:
 * - reward: the joined feedback's `reward`, else its `value`; a rate when every one is 0 or 1
 *   (a conversion), otherwise a mean;
 * - accuracy: whether the feedback's `label` equals the one-row prediction's label; a rate;
 * - latency: `latency_ms` of answers with a 2xx status, since a fast refusal is no speed-up; a mean;
 * - error-rate: whether the status was 5xx, over all served requests; a rate.
 */
export function metricObservations(
  predictions: readonly JoinedPrediction[],
  metric: ExperimentMetric,
): MetricObservations {
  const observe = OBSERVERS[metric];
  const byVersion = new Map<string, Observation[]>();
  for (const prediction of predictions) {
    let observations = byVersion.get(prediction.version);
    if (!observations) byVersion.set(prediction.version, (observations = []));
    const value = observe(prediction);
    if (value !== undefined) observations.push({ time: prediction.time, value });
  }
  const higherIsBetter = metric === 'reward' || metric === 'accuracy';
  const kind = metric === 'latency' || (metric === 'reward' && !allBinary(byVersion.values())) ? 'mean' : 'rate';
  return { metric, kind, higherIsBetter, byVersion };
}

const OBSERVERS: Record<ExperimentMetric, (prediction: JoinedPrediction) => number | undefined> = {
  reward: ({ feedback }) => finite(feedback?.reward) ?? finite(feedback?.value),
  accuracy: ({ feedback, prediction }) =>
    prediction !== undefined && typeof feedback?.label === 'string' ? Number(feedback.label === prediction) : undefined,
  latency: ({ status, latencyMs }) => (status >= 200 && status < 300 ? latencyMs : undefined),
  'error-rate': ({ status }) => Number(status >= 500),
};

function finite(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

function allBinary(groups: Iterable<readonly Observation[]>): boolean {
  for (const observations of groups) {
    if (observations.some(({ value }) => value !== 0 && value !== 1)) return false;
  }
  return true;
}
