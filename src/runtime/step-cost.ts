/** A fitted term and how far off it may be (two standard errors). */
export interface Estimate {
  readonly value: number;
  readonly error: number;
}

/** What one decoding step costs, in the model's three terms, ms. */
export interface StepCost {
  /** What every step pays whatever it holds: reading the weights, launching the pass. */
  readonly fixed: Estimate;
  /** A token fed, padding included (a padded position is computed like a real one). */
  readonly perToken: Estimate;
  /** A cached position: attention over it, and the copies the graph makes of the cache. */
  readonly perPosition: Estimate;
}

/** Steps the fit looks back over: enough to hold prompt steps and joins beside steady decoding. */
const WINDOW = 256;
/** Steps before the fit is trusted. */
const MIN_STEPS = 32;

/**
 * A decoder's step cost learnt from the steps it runs, by least squares over the last WINDOW:
 * ms = fixed + perToken · tokens fed + perPosition · positions held. It decides whether rows
 * of different lengths share a batch: sharing saves a step's fixed cost, padding costs its
 * tokens and positions. On a CPU the positions cost (a 23 M-parameter decoder: ~8 µs each, so
 * a short row padded to a long one's 1,000 positions costs more than a step); on an
 * accelerator, or the simulated one, the fixed cost dominates and padding is nearly free.
 * Until the steps tell the three terms apart it returns nothing, and the engine keeps padding
 * within double; once they have, the last trusted fit stands while steady decoding (the same
 * rows every step: tokens that do not vary) says nothing new. Each term comes with its error.
 */
export class StepCostModel {
  readonly #samples = new Float64Array(WINDOW * 3);
  #count = 0;
  #fit: StepCost | undefined;
  #stale = false;

  record(tokens: number, positions: number, ms: number): void {
    const at = (this.#count % WINDOW) * 3;
    this.#samples[at] = tokens;
    this.#samples[at + 1] = positions;
    this.#samples[at + 2] = ms;
    this.#count++;
    this.#stale = true;
  }

  /** The last trusted fit: enough steps, tokens and positions that vary apart, a fixed cost above zero. */
  fit(): StepCost | undefined {
    if (this.#stale) {
      this.#stale = false;
      this.#fit = this.#solve() ?? this.#fit;
    }
    return this.#fit;
  }

  #solve(): StepCost | undefined {
    const n = Math.min(this.#count, WINDOW);
    if (n < MIN_STEPS) return undefined;
    // Centred sums: the intercept drops out, leaving a 2×2 system for the two slopes.
    let mx = 0;
    let mp = 0;
    let my = 0;
    for (let i = 0; i < n; i++) {
      mx += this.#samples[i * 3] as number;
      mp += this.#samples[i * 3 + 1] as number;
      my += this.#samples[i * 3 + 2] as number;
    }
    mx /= n;
    mp /= n;
    my /= n;
    let sxx = 0;
    let spp = 0;
    let sxp = 0;
    let sxy = 0;
    let spy = 0;
    let syy = 0;
    for (let i = 0; i < n; i++) {
      const x = (this.#samples[i * 3] as number) - mx;
      const p = (this.#samples[i * 3 + 1] as number) - mp;
      const y = (this.#samples[i * 3 + 2] as number) - my;
      sxx += x * x;
      spp += p * p;
      sxp += x * p;
      sxy += x * y;
      spy += p * y;
      syy += y * y;
    }
    const determinant = sxx * spp - sxp * sxp;
    // Tokens and positions that moved together (|correlation| > 0.95) cannot be told apart.
    if (!(sxx > 0 && spp > 0 && determinant > 0.0975 * sxx * spp)) return undefined;
    const perToken = (sxy * spp - spy * sxp) / determinant;
    const perPosition = (spy * sxx - sxy * sxp) / determinant;
    const fixed = my - perToken * mx - perPosition * mp;
    if (fixed <= 0) return undefined;
    // The residual variance, and from it each term's: noisy steps (a busy machine, a
    // simulated device's wake-ups) widen them, and the engine then decides by the bounds.
    const residual = Math.max(syy - perToken * sxy - perPosition * spy, 0) / (n - 3);
    const tokenVariance = (residual * spp) / determinant;
    const positionVariance = (residual * sxx) / determinant;
    const covariance = (-residual * sxp) / determinant;
    const fixedVariance =
      residual / n + mx * mx * tokenVariance + mp * mp * positionVariance + 2 * mx * mp * covariance;
    const estimate = (value: number, variance: number): Estimate => ({ value, error: 2 * Math.sqrt(variance) });
    return {
      fixed: estimate(fixed, fixedVariance),
      perToken: estimate(perToken, tokenVariance),
      perPosition: estimate(perPosition, positionVariance),
    };
  }
}
