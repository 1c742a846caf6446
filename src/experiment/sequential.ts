/**
 * The mixture sequential probability ratio test (mSPRT) for a difference between two arms,
 * as in Johari, Koomen, Pekelis & Walsh, "Peeking at A/B Tests" (KDD 2017) and Johari, Pekelis
 * & Walsh, "Always valid inference" (Operations Research 70(3), 2022) — the test behind
 * Optimizely's Stats Engine.
 *
 * The true difference θ is given a normal mixing distribution N(θ0, τ²). With the observed
 * difference Δ and its variance v (σA²/nA + σB²/nB), the likelihood ratio of the mixture
 * against H0: θ = θ0 is
 *
 *   Λ = √(v / (v + τ²)) · exp( τ²·(Δ − θ0)² / (2·v·(v + τ²)) )
 *
 * Under H0 Λ is a nonnegative martingale with mean 1, so by Ville's inequality
 * P(Λ ever ≥ 1/α) ≤ α: the running p-value min(1, 1/max Λ) may be read after every
 * observation and the experiment stopped the first time it is ≤ α, without inflating the
 * false positive rate. The guarantee is exact for normal observations with known variance;
 * with a plug-in variance (rates, or estimated sd) it holds asymptotically, as in Stats Engine.
 */

export interface SequentialState {
  /** The always-valid p-value so far: it never rises. */
  pValue: number;
  /** How many looks have been taken. */
  looks: number;
}

/**
 * The mixing variance τ². The mSPRT has most power for effects near τ; Johari et al. fit it to
 * the effects seen in past experiments. Without that history we take the planned minimum
 * detectable effect: τ = MDE puts the mixture's spread where the effects worth finding lie,
 * and the validity of the p-value holds for any τ² > 0, so the choice costs only power.
 */
export function mixtureVariance(minimumDetectableEffect: number): number {
  return minimumDetectableEffect * minimumDetectableEffect;
}

/** Λ for an observed difference with variance `variance`, against H0: difference = `null0`. */
export function mixtureLikelihoodRatio(difference: number, variance: number, tau2: number, null0 = 0): number {
  const shift = difference - null0;
  return (
    Math.sqrt(variance / (variance + tau2)) * Math.exp((tau2 * shift * shift) / (2 * variance * (variance + tau2)))
  );
}

/**
 * An always-valid p-value, updated at each look: p = min(p before, 1/Λ now).
 * Create one per experiment and call `look` whenever new data arrive.
 */
export class SequentialTest {
  #pValue = 1;
  #looks = 0;

  constructor(
    private readonly tau2: number,
    private readonly null0 = 0,
  ) {
    if (!(tau2 > 0)) throw new RangeError(`mixture variance must be > 0, got ${tau2}`);
  }

  /** Takes the current observed difference and its variance; returns the state after this look. */
  look(difference: number, variance: number): SequentialState {
    this.#looks += 1;
    const ratio = mixtureLikelihoodRatio(difference, variance, this.tau2, this.null0);
    this.#pValue = Math.min(this.#pValue, 1 / ratio);
    return this.state;
  }

  get state(): SequentialState {
    return { pValue: this.#pValue, looks: this.#looks };
  }
}
