import { createRequire } from 'node:module';
import type * as HdrHistogram from 'hdr-histogram-js';
import type { Histogram } from 'hdr-histogram-js';
import type { ShadowComparison } from './shadow-compare.js';

/** hdr-histogram-js takes about 16 MB loaded: only a server that runs a canary or an experiment loads it. */
let library: typeof HdrHistogram | undefined;
function histograms(): typeof HdrHistogram {
  library ??= createRequire(import.meta.url)('hdr-histogram-js') as typeof HdrHistogram;
  return library;
}

/** What a feedback joined to one prediction says about it. */
export interface FeedbackQuality {
  /** A label feedback: whether it matched the prediction. */
  readonly correct?: boolean;
  /** A reward (or value) feedback. */
  readonly reward?: number;
}

/**
 * What one version did in a window: requests, server errors and the p99 latency; the quality
 * its feedback shows; and, in a window that compares answers, how often its answers to
 * mirrored requests agreed with the served ones.
 */
export interface WindowFigures {
  readonly requests: number;
  /** Answers with a 5xx status: the version's failures, not the client's. */
  readonly errors: number;
  /** errors ÷ requests; 0 without requests. */
  readonly error_rate: number;
  /** Milliseconds; undefined without requests. */
  readonly p99_ms: number | undefined;
  /** Mirrored answers compared with the served one; a copy that failed counts, as not agreeing. */
  readonly compared?: number;
  readonly agreed?: number;
  /** agreed ÷ compared; undefined without comparisons. */
  readonly agreement?: number | undefined;
  /** Label feedbacks joined to the version's predictions. */
  readonly labels: number;
  /** Of `labels`, those that matched the prediction. */
  readonly correct: number;
  /** correct ÷ labels; undefined without labels. */
  readonly accuracy: number | undefined;
  /** Reward feedbacks joined to the version's predictions. */
  readonly rewards: number;
  /** Undefined without rewards. */
  readonly mean_reward: number | undefined;
  /** The rewards' sample standard deviation; undefined under two rewards. */
  readonly reward_sd: number | undefined;
}

/** Counts one version's answers since the window last started over. */
export class VersionWindow {
  /** Only a window that compares reports agreement: elsewhere a 0 of 0 would read as a figure. */
  readonly #compares: boolean;
  #requests = 0;
  #errors = 0;
  #compared = 0;
  #agreed = 0;
  #labels = 0;
  #correct = 0;
  #rewards = 0;
  #rewardSum = 0;
  #rewardSquares = 0;
  readonly #latencyUs: Histogram = histograms().build({
    lowestDiscernibleValue: 1,
    highestTrackableValue: 3_600_000_000,
    numberOfSignificantValueDigits: 3,
  });

  constructor(options: { readonly compares?: boolean } = {}) {
    this.#compares = options.compares ?? false;
  }

  record(status: number, seconds: number): void {
    this.#requests += 1;
    if (status >= 500) this.#errors += 1;
    this.#latencyUs.recordValue(Math.max(1, Math.round(seconds * 1e6)));
  }

  /** One of this version's answers to a mirrored request, compared with the served answer. */
  recordComparison(result: ShadowComparison): void {
    this.#compared += 1;
    if (result === 'agree') this.#agreed += 1;
  }

  recordFeedback(quality: FeedbackQuality): void {
    if (quality.correct !== undefined) {
      this.#labels += 1;
      if (quality.correct) this.#correct += 1;
    }
    // A reward that is not a number would turn the mean into NaN for the rest of the step.
    const reward = quality.reward;
    if (reward !== undefined && Number.isFinite(reward)) {
      this.#rewards += 1;
      this.#rewardSum += reward;
      this.#rewardSquares += reward * reward;
    }
  }

  figures(): WindowFigures {
    const requests = this.#requests;
    const rewards = this.#rewards;
    const mean = rewards === 0 ? undefined : this.#rewardSum / rewards;
    return {
      requests,
      errors: this.#errors,
      error_rate: requests === 0 ? 0 : this.#errors / requests,
      p99_ms: requests === 0 ? undefined : this.#latencyUs.getValueAtPercentile(99) / 1000,
      ...(this.#compares
        ? {
            compared: this.#compared,
            agreed: this.#agreed,
            agreement: this.#compared === 0 ? undefined : this.#agreed / this.#compared,
          }
        : {}),
      labels: this.#labels,
      correct: this.#correct,
      accuracy: this.#labels === 0 ? undefined : this.#correct / this.#labels,
      rewards,
      mean_reward: mean,
      reward_sd:
        mean === undefined || rewards < 2
          ? undefined
          : // Rounding can take the sum of squares a hair under n × mean².
            Math.sqrt(Math.max(0, (this.#rewardSquares - rewards * mean * mean) / (rewards - 1))),
    };
  }

  reset(): void {
    this.#requests = 0;
    this.#errors = 0;
    this.#compared = 0;
    this.#agreed = 0;
    this.#labels = 0;
    this.#correct = 0;
    this.#rewards = 0;
    this.#rewardSum = 0;
    this.#rewardSquares = 0;
    this.#latencyUs.reset();
  }
}
