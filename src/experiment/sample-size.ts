import { noncentralTUpperTail, normalQuantile, tQuantile } from './distributions.js';

/** What a sample-size plan needs besides the metric: the error rates and how many arms. */
export interface PlanOptions {
  /** Two-sided significance level of the whole experiment. */
  alpha: number;
  /** Probability of detecting the effect when it is there (1 − β). */
  power: number;
  /** Arms, control included. */
  variants: number;
}

export interface SamplePlan {
  /** The significance level each treatment-vs-control comparison is run at. */
  alphaPerComparison: number;
  /** Sample size in each arm (rounded up). */
  perVariant: number;
  total: number;
}

/**
 * Each treatment is compared with the control, `variants − 1` comparisons; Bonferroni splits
 * alpha evenly among them so the chance of any false positive stays ≤ alpha. It is
 * conservative when the comparisons are correlated (they share the control), but needs no
 * assumption about how.
 */
export function alphaPerComparison(alpha: number, variants: number): number {
  return variants > 2 ? alpha / (variants - 1) : alpha;
}

/**
 * Per-arm sample size to tell rate `p1` from `p2` with a two-sided two-proportion z-test:
 *
 *   n = ( z(1−α/2)·√(2·p̄·(1−p̄)) + z(power)·√(p1(1−p1) + p2(1−p2)) )² / (p1 − p2)²,  p̄ = (p1+p2)/2
 *
 * the pooled variance under H0 and the unpooled one under H1, without continuity correction:
 * Fleiss, Levin & Paik, "Statistical Methods for Rates and Proportions" (3rd ed., 2003),
 * eq. 4.14 without the correction term; the same formula as R's `power.prop.test` and
 * Evan Miller's online calculator.
 */
export function rateSampleSize(p1: number, p2: number, options: PlanOptions): SamplePlan {
  const alpha = alphaPerComparison(options.alpha, options.variants);
  const zAlpha = normalQuantile(1 - alpha / 2);
  const zPower = normalQuantile(options.power);
  const pBar = (p1 + p2) / 2;
  const root = zAlpha * Math.sqrt(2 * pBar * (1 - pBar)) + zPower * Math.sqrt(p1 * (1 - p1) + p2 * (1 - p2));
  return plan((root * root) / ((p1 - p2) * (p1 - p2)), alpha, options.variants);
}

/**
 * Per-arm sample size to detect a difference `delta` in means with standard deviation `sd`
 * in both arms, two-sided: the smallest n whose two-sample t-test has the power asked, its
 * power computed exactly from the noncentral t (df = 2(n − 1), noncentrality √(n/2)·delta/sd,
 * the upper tail beyond t(1 − α/2) as R's `power.t.test` does by default), so small samples
 * match R too. The search starts from the normal-theory size with Guenther's correction,
 *
 *   n = 2·(z(1−α/2) + z(power))²·sd²/delta² + z(1−α/2)²/4
 *
 * (W. C. Guenther, "Sample size formulas for normal theory t tests", The American
 * Statistician 35(4), 1981), which is within one of the answer.
 */
export function meanSampleSize(delta: number, sd: number, options: PlanOptions): SamplePlan {
  const alpha = alphaPerComparison(options.alpha, options.variants);
  const zAlpha = normalQuantile(1 - alpha / 2);
  const zPower = normalQuantile(options.power);
  const effect = Math.abs(delta) / sd;
  const guess = (2 * (zAlpha + zPower) ** 2) / (effect * effect) + (zAlpha * zAlpha) / 4;
  const powerAt = (n: number): number => {
    const df = 2 * (n - 1);
    return noncentralTUpperTail(tQuantile(1 - alpha / 2, df), df, Math.sqrt(n / 2) * effect);
  };
  let n = Math.max(2, Math.ceil(guess - 1e-9));
  while (n > 2 && powerAt(n - 1) >= options.power) n -= 1;
  while (powerAt(n) < options.power) n += 1;
  return { alphaPerComparison: alpha, perVariant: n, total: n * options.variants };
}

function plan(n: number, alpha: number, variants: number): SamplePlan {
  // Rounding noise such as 3840.0000000001 must not cost a whole extra unit.
  const perVariant = Math.ceil(n - 1e-9);
  return { alphaPerComparison: alpha, perVariant, total: perVariant * variants };
}
