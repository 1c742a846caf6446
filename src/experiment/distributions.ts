/**
 * The distribution functions the experiment statistics stand on, from stdlib
 * (@stdlib/stats-base-dists-*): typed, actively released, and ports of Boost/Cephes
 * algorithms, so the tails are accurate where hand-written approximations are not.
 * Everything else in src/experiment calls these four, never the packages directly.
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
