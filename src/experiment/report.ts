import { ExperimentDataError } from '../core/errors.js';
import { normalQuantile, tQuantile } from './distributions.js';
import { summarize, twoProportionZTest, welchTTest, type Comparison } from './fixed-horizon.js';
import { guardrailsByVersion } from './guardrails.js';
import type { JoinedLog } from './join.js';
import { metricObservations, type ExperimentMetric, type Observation } from './metric.js';
import { formatFigure } from './report-format.js';
import type { ComparisonSummary, ExperimentReport, ReportTest, VariantSummary } from './report-types.js';
import { alphaPerComparison } from './sample-size.js';
import { mixtureScale, replaySequential, type MixtureScale } from './sequential-replay.js';
import { decideVerdict } from './verdict.js';

export interface ReportOptions {
  metric: ExperimentMetric;
  /** The version the others are compared with; the lowest one when absent. */
  control?: string;
  /** Two-sided significance level of the whole experiment. */
  alpha: number;
  /** Observations per variant the experiment was planned for (`experiment plan`). */
  plannedN?: number;
  test: 'fixed' | 'sequential';
  /** The minimum detectable effect as an absolute difference: the mSPRT's τ. */
  mde?: number;
}

/** Confidence of each variant's own interval. */
const VARIANT_CONFIDENCE = 0.95;

/**
 * Versions compare as numbers where they are numbers (10 after 9), as the model repository
 * orders them; a copy of its rule, since src/experiment sits below src/repository.
 */
const compareVersions = (a: string, b: string): number => a.localeCompare(b, 'en', { numeric: true });

const NO_OBSERVATIONS_BECAUSE: Record<ExperimentMetric, string> = {
  reward: 'no joined feedback carries a reward or value',
  accuracy: 'no joined feedback carries a label for a one-row prediction with a label',
  latency: 'no request was answered with a 2xx status',
  'error-rate': 'no request was served',
};

/** The report on a joined log: per-variant figures, each comparison with the control, and the verdict. */
export function analyzeExperiment(log: JoinedLog, options: ReportOptions): ExperimentReport {
  const { metric } = options;
  const observations = metricObservations(log.predictions, metric);
  const versions = [...observations.byVersion.keys()].sort(compareVersions);
  if (versions.length < 2) {
    throw new ExperimentDataError(
      `model "${log.model}" has one variant in the log (version ${versions.join('')}); a report compares two or more`,
    );
  }
  const control = options.control ?? versions[0] ?? '';
  if (!versions.includes(control)) {
    throw new ExperimentDataError(`--control ${control}: the log has no served predictions of that version`);
  }
  const samples = new Map(versions.map((version) => [version, observations.byVersion.get(version) ?? []]));
  for (const [version, sample] of samples) {
    if (sample.length === 0) {
      throw new ExperimentDataError(
        `version ${version} has no observations of ${metric}: ${NO_OBSERVATIONS_BECAUSE[metric]}`,
      );
    }
    if (observations.kind === 'mean' && sample.length < 2) {
      throw new ExperimentDataError(
        `version ${version} has one observation of ${metric}; a mean needs two for its variance`,
      );
    }
  }

  const guardrails = guardrailsByVersion(log.predictions);
  const variants = versions.map((version): VariantSummary => {
    const sample = values(samples.get(version) ?? []);
    const figures = guardrails.get(version);
    return {
      version,
      control: version === control,
      n: sample.length,
      ...estimateWithInterval(sample, observations.kind),
      requests: figures?.requests ?? 0,
      error_rate: figures?.errorRate ?? 0,
      p99_latency_ms: figures?.p99LatencyMs ?? 0,
    };
  });

  const alpha = alphaPerComparison(options.alpha, versions.length);
  const controlSample = samples.get(control) ?? [];
  const controlEstimate = variants.find((variant) => variant.control)?.estimate ?? 0;
  const scale = mixtureScale(options.mde, controlEstimate, [...samples.values()].flat());
  const comparisons = versions
    .filter((version) => version !== control)
    .map((version): ComparisonSummary => {
      const sample = samples.get(version) ?? [];
      const fixed = fixedComparison(values(controlSample), values(sample), observations.kind, 1 - alpha);
      const sequential = replaySequential(controlSample, sample, observations.kind, scale);
      return {
        version,
        difference: fixed.difference,
        ci: [fixed.confidenceInterval[0], fixed.confidenceInterval[1]],
        ci_confidence: 1 - alpha,
        fixed_p_value: Number.isNaN(fixed.pValue) ? null : fixed.pValue,
        sequential_p_value: sequential.pValue,
        sequential_looks: sequential.looks,
      };
    });

  return {
    model: log.model,
    metric,
    kind: observations.kind,
    better: observations.higherIsBetter ? 'higher' : 'lower',
    control,
    alpha: options.alpha,
    alpha_per_comparison: alpha,
    planned_n: options.plannedN ?? null,
    test: describeTest(options.test, observations.kind, scale),
    log: {
      files: log.files,
      skipped_lines: log.skippedLines,
      served_predictions: log.predictions.length,
      shadow_records: log.shadowRecords,
      feedback_records: log.feedbackRecords,
      unjoined_feedback: log.unjoinedFeedback,
    },
    variants,
    comparisons,
    verdict: decideVerdict({
      test: options.test,
      metric,
      higherIsBetter: observations.higherIsBetter,
      control,
      alphaPerComparison: alpha,
      plannedN: options.plannedN,
      variants,
      comparisons,
    }),
  };
}

function values(sample: readonly Observation[]): number[] {
  return sample.map((observation) => observation.value);
}

/** A rate's Wald interval, or a mean's Student's t interval. */
function estimateWithInterval(
  sample: readonly number[],
  kind: 'rate' | 'mean',
): Pick<VariantSummary, 'estimate' | 'ci'> {
  const n = sample.length;
  const upper = 1 - (1 - VARIANT_CONFIDENCE) / 2;
  if (kind === 'rate') {
    const rate = sum(sample) / n;
    const half = normalQuantile(upper) * Math.sqrt((rate * (1 - rate)) / n);
    return { estimate: rate, ci: [rate - half, rate + half] };
  }
  const { mean, variance } = summarize(sample);
  const half = tQuantile(upper, n - 1) * Math.sqrt(variance / n);
  return { estimate: mean, ci: [mean - half, mean + half] };
}

function fixedComparison(
  control: readonly number[],
  treatment: readonly number[],
  kind: 'rate' | 'mean',
  confidence: number,
): Comparison {
  if (kind === 'rate') {
    return twoProportionZTest(sum(control), control.length, sum(treatment), treatment.length, confidence);
  }
  return welchTTest(summarize(control), summarize(treatment), confidence);
}

function sum(sample: readonly number[]): number {
  return sample.reduce((total, value) => total + value, 0);
}

const TAU_FROM: Record<MixtureScale['source'], string> = {
  mde: 'the --mde',
  control: "10 % of the control's",
  'pooled-sd': 'the standard deviation of all observations',
};

function describeTest(
  chosen: 'fixed' | 'sequential',
  kind: 'rate' | 'mean',
  scale: MixtureScale | undefined,
): ReportTest {
  const fixed = kind === 'rate' ? 'two-proportion z-test' : "Welch's t-test";
  const mixture = scale
    ? `τ = ${formatFigure(scale.tau)}, ${TAU_FROM[scale.source]}${scale.source === 'control' ? ` ${kind}` : ''}`
    : 'no variation in any arm: nothing to test';
  return {
    chosen,
    description: chosen === 'fixed' ? `fixed-horizon ${fixed}` : `sequential: mixture SPRT (${mixture}), always valid`,
    fixed,
    tau: scale?.tau ?? null,
    tau_from: scale?.source ?? null,
  };
}
