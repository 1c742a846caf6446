import { cpus, platform, arch } from 'node:os';
import ort from 'onnxruntime-node';
import { BATCHSERVE_VERSION } from '../version.js';
import { fitBatchCost, recommend, recommendationFor, speedupFitOf, speedupTable } from './fit.js';
import { planCapacity, type PlanTarget } from './plan.js';
import type { BatchCostFit, BenchReport, PointResult, RateSearchResult } from './report-types.js';
import { versionSplitWarning } from './served-version.js';
import type { BatchTimeSample } from './sweep.js';

export interface ReportInputs {
  readonly target: BenchReport['target'];
  readonly points: readonly PointResult[];
  /** Forward-pass times per batch size from the server's statistics. */
  readonly serverSamples: readonly BatchTimeSample[];
  readonly inProcessSamples?: readonly BatchTimeSample[];
  readonly sloP99Ms?: number;
  /** `--plan`: the rate to serve, the budget, and the sweep's rate searches. */
  readonly plan?: PlanTarget & { readonly searches: readonly RateSearchResult[] };
}

/** Puts the measured points together with the batching model that explains them. */
export function buildReport(inputs: ReportInputs): BenchReport {
  const fit = inputs.serverSamples.length >= 2 ? fitBatchCost([...inputs.serverSamples]) : undefined;
  const inProcess = inputs.inProcessSamples ? fitBatchCost([...inputs.inProcessSamples]) : undefined;
  const speedupFit = speedupFitOf({ fit, inProcess });
  const model = speedupFit === 'fit' ? fit : inProcess;
  const plan = inputs.plan ? planCapacity(inputs.points, inputs.plan.searches, inputs.plan) : undefined;
  // One recommendation per report: with a plan, the configuration the plan sized replicas for.
  const recommendation = plan
    ? recommendationFor(plan.point, plan.sloP99Ms)
    : inputs.sloP99Ms === undefined
      ? undefined
      : recommend([...inputs.points], inputs.sloP99Ms);
  return {
    schemaVersion: 1,
    createdAt: new Date().toISOString(),
    environment: {
      batchserve: BATCHSERVE_VERSION,
      node: process.version,
      onnxruntime: ort.env.versions.common,
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? 'unknown',
      platform: `${platform()}-${arch()}`,
    },
    target: inputs.target,
    points: inputs.points,
    ...(fit ? { fit } : {}),
    ...(inProcess ? { inProcess } : {}),
    ...(speedupFit ? { speedupFit } : {}),
    speedup: model && inputs.points.length > 0 ? speedupTable(model, [...inputs.points]) : [],
    ...(inputs.sloP99Ms !== undefined ? { sloP99Ms: inputs.sloP99Ms } : {}),
    ...(recommendation ? { recommendation } : {}),
    ...(plan ? { plan } : {}),
    warnings: warningsFor(inputs, fit, recommendation === undefined, plan === undefined),
  };
}

/** Poor fits are flagged on the fits themselves (`poorFit`) and in the table's summary. */
function warningsFor(
  inputs: ReportInputs,
  fit: BatchCostFit | undefined,
  noRecommendation: boolean,
  noPlan: boolean,
): string[] {
  const warnings: string[] = [];
  const failed = inputs.points.filter((point) => point.errorCount > 0);
  if (failed.length > 0) {
    const total = failed.reduce((sum, point) => sum + point.errorCount, 0);
    warnings.push(
      `THE SERVER RETURNED ERRORS: ${total} failed requests in ${failed.length} of ${inputs.points.length} points`,
    );
  }
  const unstable = inputs.points.filter((point) => !point.stable);
  if (unstable.length > 0) warnings.push(unstableWarning(unstable));
  const split = versionSplitWarning(inputs.points);
  if (split !== undefined) warnings.push(split);
  // A plain HTTP server keeps no statistics at all; the fit summary says so instead.
  if (!fit && inputs.points.length > 0 && inputs.target.protocol !== 'http-json') {
    warnings.push('the server formed fewer than two batch sizes, so c and m could not be fitted from its statistics');
  }
  if (inputs.sloP99Ms !== undefined && noRecommendation) {
    warnings.push(`no configuration met p99 ≤ ${inputs.sloP99Ms} ms without errors`);
  }
  if (inputs.plan && noPlan) {
    warnings.push(
      `no capacity plan: no open-loop rate was served in full with p99 ≤ ${inputs.plan.sloP99Ms} ms and no errors`,
    );
  }
  return warnings;
}

/** Says what the stable column's reasons mean and what to change, once for all such points. */
function unstableWarning(unstable: readonly PointResult[]): string {
  const rule = unstable.find((point) => point.variation)?.variation;
  const what = rule
    ? `their throughput, p99 or completions a second strayed more than ±${rule.limitPct}% from the mean of the last ${rule.required} windows ` +
      '(the stable column says which, and by how much)'
    : 'their last windows disagreed';
  return (
    `${unstable.length} point(s) did not stabilize before --duration ran out: ${what}; ` +
    'their figures vary from run to run. A longer --window (more requests per p99) or --duration steadies them'
  );
}
