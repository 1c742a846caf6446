import {
  COST_FULL_SAY as FULL_SAY,
  COST_SEEDS as SEEDS,
  COST_WINDOW as WINDOW,
  MIN_DISTINCT_SIZES,
  MIN_R2,
  REFIT_EVERY,
} from './tuning.js';

/**
 * The server's own estimate of T(B) = c + m·B for one shape of requests, learnt from the
 * batches it runs: the last WINDOW batches, each size's median time (a GC pause or a noisy
 * neighbour moves a median little, a mean much), and a least-squares line through the sizes,
 * each with a say that grows with its batches up to FULL_SAY (a size seen once or twice, on a
 * busy machine, is a noisy median that would sink R² as much as a size seen a hundred times
 * could). Old batches leave the window, so the line follows a cost that
 * drifts (a machine under other load, a GPU warming up).
 *
 * Batches timed at load (`seed`) are a prior: a size the window has no batch of keeps its
 * load-time median. Live traffic often runs one or two sizes only (a closed loop at delay 0
 * alternates between two), which alone could never make a trusted line.
 */
export interface CostFit {
  /** Fixed cost of one forward pass, ms. */
  readonly c: number;
  /** Cost of each row, ms. */
  readonly m: number;
  readonly r2: number;
  /** Distinct batch sizes in the window. */
  readonly sizes: number;
  /** Whether the line may steer batching; when not, `reason` says why. */
  readonly trusted: boolean;
  readonly reason: string | undefined;
}

/** A fixed cost this close below 0 is 0 (rounding of a line through timings with no fixed cost). */
const NEGLIGIBLE_MS = 1e-6;

export class OnlineCostFit {
  readonly #rows = new Int32Array(WINDOW);
  readonly #ms = new Float64Array(WINDOW);
  #count = 0;
  #next = 0;
  #sinceFit = 0;
  /** A batch of a size the current line does not rest on came in. */
  #newSize = false;
  #fitSizes = new Set<number>();
  #fit: CostFit | undefined;
  readonly #seedRows: number[] = [];
  readonly #seedMs: number[] = [];

  /** A batch timed at load; kept for sizes the live window lacks. */
  seed(rows: number, ms: number): void {
    if (!(rows >= 1 && ms >= 0 && Number.isFinite(ms)) || this.#seedRows.length >= SEEDS) return;
    this.#seedRows.push(rows);
    this.#seedMs.push(ms);
    this.#fit = undefined;
  }

  /** One executed batch: its rows and how long it ran, ms. */
  add(rows: number, ms: number): void {
    if (!(rows >= 1 && ms >= 0 && Number.isFinite(ms))) return;
    this.#rows[this.#next] = rows;
    this.#ms[this.#next] = ms;
    this.#next = (this.#next + 1) % WINDOW;
    this.#count = Math.min(this.#count + 1, WINDOW);
    this.#sinceFit += 1;
    if (!this.#fitSizes.has(rows)) this.#newSize = true;
  }

  /**
   * The current line: the same object until REFIT_EVERY new batches came in or a new size
   * did (a refit costs tens of µs; the hot path asks on every decision).
   */
  current(): CostFit {
    if (this.#fit === undefined || this.#sinceFit >= REFIT_EVERY || this.#newSize) {
      this.#fit = this.#compute();
      this.#sinceFit = 0;
      this.#newSize = false;
    }
    return this.#fit;
  }

  #compute(): CostFit {
    const bySize = new Map<number, number[]>();
    for (let index = 0; index < this.#count; index++) {
      const rows = this.#rows[index] as number;
      const times = bySize.get(rows);
      if (times) times.push(this.#ms[index] as number);
      else bySize.set(rows, [this.#ms[index] as number]);
    }
    const seeded = new Map<number, number[]>();
    this.#seedRows.forEach((rows, index) => {
      if (bySize.has(rows)) return;
      const times = seeded.get(rows);
      if (times) times.push(this.#seedMs[index] as number);
      else seeded.set(rows, [this.#seedMs[index] as number]);
    });
    const points = [...bySize, ...seeded].map(([rows, times]) => ({
      x: rows,
      y: median(times),
      w: Math.min(times.length, FULL_SAY),
    }));
    this.#fitSizes = new Set(bySize.keys());
    const line = leastSquares(points);
    const sizes = points.length;
    const reason =
      sizes < MIN_DISTINCT_SIZES
        ? `${sizes} distinct batch size${sizes === 1 ? '' : 's'} so far; ${MIN_DISTINCT_SIZES} needed`
        : line.slope <= 0
          ? `per-row cost ${line.slope.toFixed(4)} ms is not positive`
          : line.intercept < -NEGLIGIBLE_MS
            ? `fixed cost ${line.intercept.toFixed(3)} ms is negative`
            : line.r2 < MIN_R2
              ? `R² ${line.r2.toFixed(2)} below ${MIN_R2}`
              : undefined;
    return { c: line.intercept, m: line.slope, r2: line.r2, sizes, trusted: reason === undefined, reason };
  }
}

function median(values: number[]): number {
  values.sort((a, b) => a - b);
  const middle = values.length >> 1;
  return values.length % 2 === 1
    ? (values[middle] as number)
    : ((values[middle - 1] as number) + (values[middle] as number)) / 2;
}

/** Weighted least squares; with fewer than two distinct x the line is flat through the mean. */
function leastSquares(points: readonly { x: number; y: number; w: number }[]): {
  intercept: number;
  slope: number;
  r2: number;
} {
  const total = points.reduce((sum, p) => sum + p.w, 0);
  if (total === 0) return { intercept: 0, slope: 0, r2: 0 };
  const meanX = points.reduce((sum, p) => sum + p.w * p.x, 0) / total;
  const meanY = points.reduce((sum, p) => sum + p.w * p.y, 0) / total;
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (const { x, y, w } of points) {
    sxy += w * (x - meanX) * (y - meanY);
    sxx += w * (x - meanX) ** 2;
    syy += w * (y - meanY) ** 2;
  }
  if (sxx === 0) return { intercept: meanY, slope: 0, r2: 0 };
  const slope = sxy / sxx;
  const intercept = meanY - slope * meanX;
  const residual = points.reduce((sum, p) => sum + p.w * (p.y - (intercept + slope * p.x)) ** 2, 0);
  return { intercept, slope, r2: syy === 0 ? 1 : 1 - residual / syy };
}
