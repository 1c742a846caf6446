import { cpus, platform, arch } from 'node:os';
import ort from 'onnxruntime-node';
import { BATCHSERVE_VERSION } from '../version.js';
import { fitBatchCost, recommend, speedupTable } from './fit.js';
import type { BatchCostFit, BenchReport, PointResult } from './report-types.js';
import type { BatchTimeSample } from './sweep.js';

export interface ReportInputs {
  readonly target: BenchReport['target'];
  readonly points: readonly PointResult[];
  /** Forward-pass times per batch size from the server's statistics. */
  readonly serverSamples: readonly BatchTimeSample[];
  readonly inProcessSamples?: readonly BatchTimeSample[];
  readonly sloP99Ms?: number;
}

/** Puts the measured points together with the batching model that explains them. */
export function buildReport(inputs: ReportInputs): BenchReport {
  const fit = inputs.serverSamples.length >= 2 ? fitBatchCost([...inputs.serverSamples]) : undefined;
  const inProcess = inputs.inProcessSamples ? fitBatchCost([...inputs.inProcessSamples]) : undefined;
  const model = inProcess ?? fit;
  const recommendation = inputs.sloP99Ms === undefined ? undefined : recommend([...inputs.points], inputs.sloP99Ms);
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
    speedup: model && inputs.points.length > 0 ? speedupTable(model, [...inputs.points]) : [],
    ...(recommendation ? { recommendation } : {}),
    warnings: warningsFor(inputs, fit, recommendation === undefined),
  };
}

/** Poor fits are flagged on the fits themselves (`poorFit`) and in the table's summary. */
function warningsFor(inputs: ReportInputs, fit: BatchCostFit | undefined, noRecommendation: boolean): string[] {
  const warnings: string[] = [];
  const failed = inputs.points.filter((point) => point.errorCount > 0);
  if (failed.length > 0) {
    const total = failed.reduce((sum, point) => sum + point.errorCount, 0);
    warnings.push(
      `THE SERVER RETURNED ERRORS: ${total} failed requests in ${failed.length} of ${inputs.points.length} points`,
    );
  }
  const unstable = inputs.points.filter((point) => !point.stable).length;
  if (unstable > 0) warnings.push(`${unstable} point(s) did not stabilize within the window limit; their figures vary`);
  if (!fit && inputs.points.length > 0) {
    warnings.push('the server formed fewer than two batch sizes, so c and m could not be fitted from its statistics');
  }
  if (inputs.sloP99Ms !== undefined && noRecommendation) {
    warnings.push(`no configuration met p99 ≤ ${inputs.sloP99Ms} ms without errors`);
  }
  return warnings;
}
