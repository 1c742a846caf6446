/**
 * The autoscaling signal: each pod's gauge of rows queued plus rows in flight, per model and
 * version. Prometheus sums it over every pod of the model, and the autoscaler divides the sum
 * by the rows one replica should hold (the target), so replicas = ceil(sum / target).
 */
export const PENDING_ROWS_METRIC = 'batchserve_pending_rows';

/** `sum(batchserve_pending_rows{namespace="…",model="…"})`; names are DNS labels, so nothing needs escaping. */
export function pendingRowsQuery(model: string, namespace: string | undefined): string {
  const matchers = [...(namespace === undefined ? [] : [`namespace="${namespace}"`]), `model="${model}"`];
  return `sum(${PENDING_ROWS_METRIC}{${matchers.join(',')}})`;
}
