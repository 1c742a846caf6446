import { build, type Histogram } from 'hdr-histogram-js';

/** What one version did in a window: requests, server errors and the p99 latency. */
export interface WindowFigures {
  readonly requests: number;
  /** Answers with a 5xx status: the version's failures, not the client's. */
  readonly errors: number;
  /** errors ÷ requests; 0 without requests. */
  readonly error_rate: number;
  /** Milliseconds; undefined without requests. */
  readonly p99_ms: number | undefined;
}

/** Counts one version's answers since the window last started over. */
export class VersionWindow {
  #requests = 0;
  #errors = 0;
  readonly #latencyUs: Histogram = build({
    lowestDiscernibleValue: 1,
    highestTrackableValue: 3_600_000_000,
    numberOfSignificantValueDigits: 3,
  });

  record(status: number, seconds: number): void {
    this.#requests += 1;
    if (status >= 500) this.#errors += 1;
    this.#latencyUs.recordValue(Math.max(1, Math.round(seconds * 1e6)));
  }

  figures(): WindowFigures {
    const requests = this.#requests;
    return {
      requests,
      errors: this.#errors,
      error_rate: requests === 0 ? 0 : this.#errors / requests,
      p99_ms: requests === 0 ? undefined : this.#latencyUs.getValueAtPercentile(99) / 1000,
    };
  }

  reset(): void {
    this.#requests = 0;
    this.#errors = 0;
    this.#latencyUs.reset();
  }
}
