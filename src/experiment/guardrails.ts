import type { JoinedPrediction } from './join.js';

/** What a variant must not break while it wins on the metric: the figures a canary watches. */
export interface Guardrails {
  /** Served requests, whatever their status. */
  readonly requests: number;
  /** Share of served requests answered with a 5xx status. */
  readonly errorRate: number;
  /** Nearest-rank 99th percentile of `latency_ms` over all served requests. */
  readonly p99LatencyMs: number;
}

export function guardrailsByVersion(predictions: readonly JoinedPrediction[]): Map<string, Guardrails> {
  const latencies = new Map<string, number[]>();
  const errors = new Map<string, number>();
  for (const { version, status, latencyMs } of predictions) {
    let values = latencies.get(version);
    if (!values) latencies.set(version, (values = []));
    values.push(latencyMs);
    if (status >= 500) errors.set(version, (errors.get(version) ?? 0) + 1);
  }
  const guardrails = new Map<string, Guardrails>();
  for (const [version, values] of latencies) {
    guardrails.set(version, {
      requests: values.length,
      errorRate: (errors.get(version) ?? 0) / values.length,
      p99LatencyMs: nearestRank(values, 0.99),
    });
  }
  return guardrails;
}

/** The smallest value with at least `quantile` of the values at or below it: always an observed value. */
export function nearestRank(values: readonly number[], quantile: number): number {
  const sorted = values.toSorted((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(quantile * sorted.length) - 1)] ?? Number.NaN;
}
