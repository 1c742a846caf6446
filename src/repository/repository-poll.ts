import type { ModelRepository, TritonPollReport } from './model-repository.js';

/** The timers the poll runs on; tests pass fake ones. */
export interface PollTimers {
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(timer: unknown): void;
}

/**
 * Triton's `--model-control-mode poll`: the repository is read again `intervalMs` after the
 * last read ended (so reads never overlap, however long a load takes), and each model made
 * what its folder holds (ModelRepository.pollTritonRepository).
 */
export class RepositoryPoll {
  readonly #repository: Pick<ModelRepository, 'pollTritonRepository'>;
  readonly #intervalMs: number;
  readonly #reported: (report: TritonPollReport) => void;
  readonly #timers: PollTimers;
  #timer: unknown;
  #running: Promise<TritonPollReport> | undefined;
  #stopped = false;

  constructor(
    repository: Pick<ModelRepository, 'pollTritonRepository'>,
    intervalMs: number,
    reported: (report: TritonPollReport) => void,
    timers: PollTimers = globalThis,
  ) {
    this.#repository = repository;
    this.#intervalMs = intervalMs;
    this.#reported = reported;
    this.#timers = timers;
  }

  start(): void {
    this.#schedule();
  }

  /** Reads the repository now (or joins the read under way); the timer starts again after it. */
  pollNow(): Promise<TritonPollReport> {
    this.#running ??= this.#repository
      .pollTritonRepository()
      .catch((error: unknown): TritonPollReport => ({
        loaded: [],
        unloaded: [],
        failed: [{ name: '(repository)', message: error instanceof Error ? error.message : String(error) }],
      }))
      .then((report) => {
        this.#reported(report);
        return report;
      })
      .finally(() => {
        this.#running = undefined;
        this.#schedule();
      });
    return this.#running;
  }

  /** No read starts after this; one under way finishes (its loads are the repository's to unload). */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#timers.clearTimeout(this.#timer);
    await this.#running;
  }

  #schedule(): void {
    this.#timers.clearTimeout(this.#timer);
    if (this.#stopped) return;
    const timer = this.#timers.setTimeout(() => {
      void this.pollNow();
    }, this.#intervalMs);
    // Node's timer must not hold the process open; a fake clock's has no unref.
    (timer as { unref?: () => void } | undefined)?.unref?.();
    this.#timer = timer;
  }
}
