import { queryGpus, type GpuSample } from './nvidia-smi.js';

export interface GpuSamplerOptions {
  /** The nvidia-smi to run: a path, or a name looked up on PATH. */
  readonly command?: string;
  readonly intervalMs: number;
  /** Each successful reading; `undefined` when a query failed, so stale figures can be dropped. */
  readonly onReading: (gpus: readonly GpuSample[] | undefined) => void;
  /** One line when sampling stops for good (no nvidia-smi) or a query first fails with a new error. */
  readonly log?: (message: string) => void;
}

/**
 * Queries nvidia-smi now and then every `intervalMs` until stopped. The next query is timed
 * from the end of the last, so a slow driver never stacks them up; the timer is unref'd, so
 * sampling never keeps a process alive. Without nvidia-smi it stops for good after one log
 * line; a failing query (a driver error) is logged once per distinct error and retried.
 */
export class GpuSampler {
  readonly #options: GpuSamplerOptions;
  #timer: NodeJS.Timeout | undefined;
  #abort: AbortController | undefined;
  #running = false;
  /** Bumped by each start, so a query still in flight from before a stop cannot start a second chain. */
  #chain = 0;
  #lastError: string | undefined;
  /** Set once nvidia-smi is known to be absent: nothing can start sampling again. */
  #missing = false;

  constructor(options: GpuSamplerOptions) {
    this.#options = options;
  }

  get running(): boolean {
    return this.#running;
  }

  start(): void {
    if (this.#running || this.#missing) return;
    this.#running = true;
    this.#abort = new AbortController();
    void this.#sample(++this.#chain);
  }

  stop(): void {
    this.#running = false;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#abort?.abort();
    this.#abort = undefined;
  }

  async #sample(chain: number): Promise<void> {
    const reading = await queryGpus(this.#options.command, this.#abort?.signal);
    if (!this.#running || chain !== this.#chain) return;
    if (reading.kind === 'missing') {
      this.#missing = true;
      this.stop();
      this.#options.log?.(`GPU metrics off: ${reading.error}`);
      this.#options.onReading(undefined);
      return;
    }
    if (reading.kind === 'failed') {
      if (reading.error !== this.#lastError) this.#options.log?.(`GPU metrics: nvidia-smi failed: ${reading.error}`);
      this.#lastError = reading.error;
      this.#options.onReading(undefined);
    } else {
      this.#lastError = undefined;
      this.#options.onReading(reading.gpus);
    }
    this.#timer = setTimeout(() => void this.#sample(chain), this.#options.intervalMs);
    this.#timer.unref();
  }
}
