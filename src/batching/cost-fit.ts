/**
 * The server's own estimate of T(B) = c + m·B for one shape of requests, learnt from the
 * batches it runs: the last WINDOW batches, each size's median time (a GC pause or a noisy
 * neighbour moves a median little, a mean much), and a least-squares line through the sizes,
 * each with an equal say. Old batches leave the window, so the line follows a cost that
 * drifts (a machine under other load, a GPU warming up).
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

const WINDOW = 256;
/** Sizes the line must rest on before it steers anything. */
export const MIN_DISTINCT_SIZES = 3;
/** Below this R² the line explains the timings too poorly to bet latency on. */
export const MIN_R2 = 0.8;
/** The fit is worked out again after this many new batches, not on every one. */
const REFIT_EVERY = 8;

export class OnlineCostFit {
  readonly #rows = new Int32Array(WINDOW);
  readonly #ms = new Float64Array(WINDOW);
  #count = 0;
  #next = 0;
  #sinceFit = 0;
  #fit: CostFit | undefined;

  /** One executed batch: its rows and how long it ran, ms. */
  add(rows: number, ms: number): void {
    if (!(rows >= 1 && ms >= 0 && Number.isFinite(ms))) return;
    this.#rows[this.#next] = rows;
    this.#ms[this.#next] = ms;
    this.#next = (this.#next + 1) % WINDOW;
    this.#count = Math.min(this.#count + 1, WINDOW);
    this.#sinceFit += 1;
  }

  /** The current line; recomputed when enough new batches came in, or at each new one until it is trusted. */
  current(): CostFit {
    if (this.#fit === undefined || this.#sinceFit >= REFIT_EVERY || (!this.#fit.trusted && this.#sinceFit > 0)) {
      this.#fit = this.#compute();
      this.#sinceFit = 0;
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
    const points = [...bySize].map(([rows, times]) => ({ x: rows, y: median(times) }));
    const line = leastSquares(points);
    const sizes = points.length;
    const reason =
      sizes < MIN_DISTINCT_SIZES
        ? `${sizes} distinct batch size${sizes === 1 ? '' : 's'} so far; ${MIN_DISTINCT_SIZES} needed`
        : line.slope <= 0
          ? `per-row cost ${line.slope.toFixed(4)} ms is not positive`
          : line.intercept < 0
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

/** Ordinary least squares; with fewer than two distinct x the line is flat through the mean. */
function leastSquares(points: readonly { x: number; y: number }[]): { intercept: number; slope: number; r2: number } {
  const n = points.length;
  if (n === 0) return { intercept: 0, slope: 0, r2: 0 };
  const meanX = points.reduce((sum, p) => sum + p.x, 0) / n;
  const meanY = points.reduce((sum, p) => sum + p.y, 0) / n;
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (const { x, y } of points) {
    sxy += (x - meanX) * (y - meanY);
    sxx += (x - meanX) ** 2;
    syy += (y - meanY) ** 2;
  }
  if (sxx === 0) return { intercept: meanY, slope: 0, r2: 0 };
  const slope = sxy / sxx;
  const intercept = meanY - slope * meanX;
  const residual = points.reduce((sum, p) => sum + (p.y - (intercept + slope * p.x)) ** 2, 0);
  return { intercept, slope, r2: syy === 0 ? 1 : 1 - residual / syy };
}
