import type { ExperimentMetric } from './metric.js';
import type { TauSource } from './sequential-replay.js';

/** What `batchserve experiment report --json` prints: one document, snake_case like the rest of the CLI's JSON. */
export interface ExperimentReport {
  model: string;
  metric: ExperimentMetric;
  /** 'rate': a share of 0/1 outcomes; 'mean': an average. A reward of only 0s and 1s is a rate. */
  kind: 'rate' | 'mean';
  better: 'higher' | 'lower';
  control: string;
  /** The whole experiment's two-sided significance level. */
  alpha: number;
  /** alpha / (variants − 1) with more than two variants (Bonferroni), else alpha. */
  alpha_per_comparison: number;
  /** Per variant; null when none was given. */
  planned_n: number | null;
  test: ReportTest;
  log: LogSummary;
  /** Lowest version first. */
  variants: VariantSummary[];
  /** One per variant other than the control. */
  comparisons: ComparisonSummary[];
  verdict: Verdict;
}

export interface ReportTest {
  /** The test the verdict uses. */
  chosen: 'fixed' | 'sequential';
  /** e.g. "fixed-horizon Welch's t-test", "sequential: mixture SPRT (τ = 0.01), always valid". */
  description: string;
  fixed: 'two-proportion z-test' | "Welch's t-test";
  /** The mSPRT's mixture scale; null when no observation differs from another (nothing to test). */
  tau: number | null;
  tau_from: TauSource | null;
}

export interface LogSummary {
  files: number;
  /** Lines that were not records: not JSON, or not an object of a known `type`. */
  skipped_lines: number;
  served_predictions: number;
  /** Shadows' copies of requests, left out of every figure. */
  shadow_records: number;
  feedback_records: number;
  /** Ids with feedback but no served prediction in the files read. */
  unjoined_feedback: number;
}

export interface VariantSummary {
  version: string;
  control: boolean;
  /** Observations of the metric. */
  n: number;
  /** The mean, or the rate as a fraction. */
  estimate: number;
  /** 95 %: Wald for a rate, Student's t for a mean. */
  ci: [number, number];
  /** Guardrails over all served requests of the version. */
  requests: number;
  error_rate: number;
  p99_latency_ms: number;
}

export interface ComparisonSummary {
  version: string;
  /** This version's estimate minus the control's. */
  difference: number;
  /** The fixed-horizon test's interval, at `ci_confidence`. */
  ci: [number, number];
  /** 1 − alpha_per_comparison, so the interval and the test answer at the same level (0.95 by default). */
  ci_confidence: number;
  /** null when neither arm varies, so the test is undefined. */
  fixed_p_value: number | null;
  /** The mSPRT's always-valid p-value after replaying the log in time order. */
  sequential_p_value: number;
  sequential_looks: number;
}

export interface Verdict {
  decision: 'winner' | 'no_difference' | 'keep_collecting' | 'planned_n_not_reached' | 'no_planned_n';
  /** The winning version (the control when every other version is worse), else null. */
  winner: string | null;
  text: string;
}
