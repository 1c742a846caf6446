import { normalCdf, normalQuantile, tCdf, tQuantile } from './distributions.js';

/** A two-sided comparison of arm B with arm A: B − A, its confidence interval and p-value. */
export interface Comparison {
  difference: number;
  confidenceInterval: readonly [number, number];
  /** z for the proportion test, t for Welch's test. */
  statistic: number;
  pValue: number;
}

export interface WelchComparison extends Comparison {
  /** Welch–Satterthwaite degrees of freedom. */
  df: number;
}

/** One arm's summary of a mean metric. */
export interface ArmSummary {
  mean: number;
  /** Sample variance (n − 1 in the denominator). */
  variance: number;
  n: number;
}

/**
 * Two-proportion z-test of `successesB/nB − successesA/nA`. The statistic uses the pooled
 * rate's standard error (the variance under H0: equal rates); the interval uses the unpooled
 * (Wald) one, since it is centred on the observed difference. Textbook form, e.g. Agresti &
 * Franklin, "Statistics: The Art and Science of Learning from Data", ch. 10.1.
 */
export function twoProportionZTest(
  successesA: number,
  nA: number,
  successesB: number,
  nB: number,
  confidence = 0.95,
): Comparison {
  const pA = successesA / nA;
  const pB = successesB / nB;
  const pooled = (successesA + successesB) / (nA + nB);
  const pooledSe = Math.sqrt(pooled * (1 - pooled) * (1 / nA + 1 / nB));
  const unpooledSe = Math.sqrt((pA * (1 - pA)) / nA + (pB * (1 - pB)) / nB);
  const difference = pB - pA;
  const statistic = difference / pooledSe;
  const half = normalQuantile(1 - (1 - confidence) / 2) * unpooledSe;
  return {
    difference,
    confidenceInterval: [difference - half, difference + half],
    statistic,
    pValue: 2 * normalCdf(-Math.abs(statistic)),
  };
}

/**
 * Welch's t-test of mean B − mean A, which does not assume equal variances; df by the
 * Welch–Satterthwaite equation. The same test as R's default `t.test(x, y)`.
 */
export function welchTTest(a: ArmSummary, b: ArmSummary, confidence = 0.95): WelchComparison {
  const va = a.variance / a.n;
  const vb = b.variance / b.n;
  const se = Math.sqrt(va + vb);
  const df = (va + vb) ** 2 / (va ** 2 / (a.n - 1) + vb ** 2 / (b.n - 1));
  const difference = b.mean - a.mean;
  const statistic = difference / se;
  const half = tQuantile(1 - (1 - confidence) / 2, df) * se;
  return {
    difference,
    confidenceInterval: [difference - half, difference + half],
    statistic,
    df,
    pValue: 2 * tCdf(-Math.abs(statistic), df),
  };
}

/** Mean, sample variance and count of raw observations. */
export function summarize(values: readonly number[]): ArmSummary {
  const n = values.length;
  const mean = values.reduce((sum, value) => sum + value, 0) / n;
  const variance = values.reduce((sum, value) => sum + (value - mean) ** 2, 0) / (n - 1);
  return { mean, variance, n };
}
