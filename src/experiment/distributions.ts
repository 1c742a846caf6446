/**
 * The distribution functions the experiment statistics stand on, from stdlib
 * (@stdlib/stats-base-dists-*): typed, actively released, and ports of Boost/Cephes
 * algorithms, so the tails are accurate where hand-written approximations are not.
 * Everything else in src/experiment calls these, never the packages directly.
 */
import normalCdfOf from '@stdlib/stats-base-dists-normal-cdf';
import normalQuantileOf from '@stdlib/stats-base-dists-normal-quantile';
import tCdfOf from '@stdlib/stats-base-dists-t-cdf';
import tQuantileOf from '@stdlib/stats-base-dists-t-quantile';

/** P(Z ≤ z) for a standard normal Z. */
export function normalCdf(z: number): number {
  return normalCdfOf(z, 0, 1);
}

/** The z with P(Z ≤ z) = p for a standard normal Z. */
export function normalQuantile(p: number): number {
  return normalQuantileOf(p, 0, 1);
}

/** P(T ≤ t) for Student's t with `df` degrees of freedom (df need not be an integer). */
export function tCdf(t: number, df: number): number {
  return tCdfOf(t, df);
}

/** The t with P(T ≤ t) = p for Student's t with `df` degrees of freedom. */
export function tQuantile(p: number, df: number): number {
  return tQuantileOf(p, df);
}

/**
 * P(T > t) for a noncentral t with `df` degrees of freedom and noncentrality `ncp`, which
 * stdlib lacks: T = (Z + ncp) / S with S = √(χ²_df / df), so P(T > t) = E[1 − Φ(t·S − ncp)],
 * integrated by Simpson's rule over S's density (normalized on the grid itself, so no gamma
 * function is needed). Accurate to about 1e-7 for df ≥ 2, ample for a sample size's rounding.
 */
export function noncentralTUpperTail(t: number, df: number, ncp: number): number {
  const steps = 4000;
  // S has mean ≈ 1 and sd ≈ 1/√(2·df); 12 sd either side holds all of its mass.
  const spread = 12 / Math.sqrt(2 * df);
  const low = Math.max(0, 1 - spread);
  const high = 1 + spread;
  const h = (high - low) / steps;
  let mass = 0;
  let tail = 0;
  for (let i = 0; i <= steps; i += 1) {
    const s = low + i * h;
    const weight = (i === 0 || i === steps ? 1 : i % 2 === 1 ? 4 : 2) * densityOfS(s, df);
    mass += weight;
    tail += weight * (1 - normalCdf(t * s - ncp));
  }
  return tail / mass;
}

/** S = √(χ²_df / df)'s density up to its constant factor: s^(df−1)·exp(−df·s²/2). */
function densityOfS(s: number, df: number): number {
  return s <= 0 ? 0 : Math.exp((df - 1) * Math.log(s) - (df * s * s) / 2 + df / 2);
}
