import { PACE_BATCHES as BATCHES, PACE_LIMIT as LIMIT } from './tuning.js';

/**
 * How much slower (above 1) or faster than the cost line recent batches ran: an exponential
 * average over about the last 8 of actual ÷ predicted. The line rests on medians over 256
 * batches, so it follows a change of cost (a machine under load, a core shared with more
 * connections) only as old batches leave; a prediction of when the queue will be through
 * needs the cost now. Each ratio is clamped, so one pause (a GC, a page fault) cannot stop
 * admission for the batches after it.
 */
export class Pace {
  #value = 1;

  get value(): number {
    return this.#value;
  }

  observe(actualMs: number, predictedMs: number): void {
    if (!(predictedMs > 0) || !Number.isFinite(actualMs)) return;
    const ratio = Math.min(LIMIT, Math.max(1 / LIMIT, actualMs / predictedMs));
    this.#value += (ratio - this.#value) / BATCHES;
  }
}
