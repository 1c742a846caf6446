import { formatDuration } from '../config/schema-kit.js';
import { formatAmount, formatRate, type CanarySettings } from './canary-settings.js';
import type { WindowFigures } from './version-window.js';

/** One step's figures so far: the candidate's window and the stable version's. */
export interface StepFigures {
  readonly candidate: WindowFigures;
  readonly stable: WindowFigures;
}

/** Floating point makes 0.92 − 0.90 a hair over 0.02; a drop of exactly the limit stays inside. */
const DROP_SLACK = 1e-9;

/**
 * Every guardrail the step breaks, each worded as the rollback records it; empty when it
 * breaks none. Agreement and quality are shares of a sample, so each waits until its sample
 * reaches `min_requests`. At a step's check the error rate and p99 need no minimum — a canary
 * errs on the safe side — but judged `asResultsArrive` (after every answer) they wait for
 * `min_requests` too, or a candidate's first slow or failed request would end every canary.
 */
export function breachesOf(
  { candidate, stable }: StepFigures,
  settings: CanarySettings,
  asResultsArrive = false,
): string[] {
  const breaches: string[] = [];
  const sampled = !asResultsArrive || candidate.requests >= settings.min_requests;
  if (sampled && candidate.requests > 0 && candidate.error_rate > settings.max_error_rate) {
    breaches.push(
      `error rate ${formatRate(candidate.error_rate)} (${candidate.errors} of ${candidate.requests}) above ${formatRate(settings.max_error_rate)}`,
    );
  }
  const p99 = candidate.p99_ms;
  if (sampled && settings.max_p99 !== undefined && p99 !== undefined && p99 * 1000 > settings.max_p99) {
    breaches.push(`p99 ${p99.toFixed(1)} ms above ${formatDuration(settings.max_p99)}`);
  }
  const { min_agreement: minAgreement, max_quality_drop: maxDrop } = settings;
  const compared = candidate.compared ?? 0;
  const agreement = candidate.agreement ?? 0;
  if (minAgreement !== undefined && compared >= settings.min_requests && agreement < minAgreement) {
    breaches.push(
      `agreement ${formatRate(agreement)} (${candidate.agreed ?? 0} of ${compared} mirrored answers) below ${formatRate(minAgreement)}`,
    );
  }
  const quality = maxDrop === undefined ? undefined : qualityOf(candidate, stable, settings.min_requests);
  if (maxDrop !== undefined && quality !== undefined && quality.stable - quality.candidate > maxDrop + DROP_SLACK) {
    breaches.push(
      `${quality.measure} ${quality.candidateText} is ${formatAmount(quality.stable - quality.candidate)} below ` +
        `the stable's ${quality.stableText}, more than the ${formatAmount(maxDrop)} allowed`,
    );
  }
  return breaches;
}

/**
 * Why the step cannot be judged yet, when a guardrail's sample is short of `min_requests`:
 * the candidate's requests, its mirrored answers, or either version's feedback. A step with
 * 100 % on the candidate sends the stable nothing to mirror or to get feedback on, so there
 * agreement and quality, judged on the steps before, hold nothing.
 */
export function holdReason(
  { candidate, stable }: StepFigures,
  settings: CanarySettings,
  weight: number,
): string | undefined {
  const minimum = settings.min_requests;
  const reasons: string[] = [];
  if (candidate.requests < minimum)
    reasons.push(`${candidate.requests} of the ${minimum} requests needed to judge the step`);
  if (weight < 100 && settings.min_agreement !== undefined && (candidate.compared ?? 0) < minimum) {
    reasons.push(`${candidate.compared ?? 0} of the ${minimum} mirrored answers needed to judge agreement`);
  }
  if (weight < 100 && settings.max_quality_drop !== undefined && !qualityOf(candidate, stable, minimum)) {
    reasons.push(
      `feedback short of the ${minimum} per version needed to judge quality (labels: candidate ${candidate.labels}, stable ${stable.labels}; rewards: candidate ${candidate.rewards}, stable ${stable.rewards})`,
    );
  }
  return reasons.length === 0 ? undefined : reasons.join('; ');
}

interface QualityComparison {
  readonly measure: 'accuracy' | 'mean reward';
  readonly candidate: number;
  readonly stable: number;
  /** Each figure with the sample behind it, for the reason. */
  readonly candidateText: string;
  readonly stableText: string;
}

/**
 * Accuracy when both versions have label feedback, else mean reward when both have rewards;
 * undefined until both have `minimum` feedbacks of that kind.
 */
function qualityOf(candidate: WindowFigures, stable: WindowFigures, minimum: number): QualityComparison | undefined {
  if (candidate.labels > 0 && stable.labels > 0) {
    if (Math.min(candidate.labels, stable.labels) < minimum) return undefined;
    const accuracy = (figures: WindowFigures): number => figures.correct / figures.labels;
    const text = (figures: WindowFigures, unit: string): string =>
      `${formatRate(accuracy(figures))} (${figures.correct} of ${figures.labels}${unit})`;
    return {
      measure: 'accuracy',
      candidate: accuracy(candidate),
      stable: accuracy(stable),
      candidateText: text(candidate, ' labels'),
      stableText: text(stable, ''),
    };
  }
  if (Math.min(candidate.rewards, stable.rewards) < minimum) return undefined;
  const mean = (figures: WindowFigures): number => figures.mean_reward ?? 0;
  return {
    measure: 'mean reward',
    candidate: mean(candidate),
    stable: mean(stable),
    candidateText: `${formatAmount(mean(candidate))} (${candidate.rewards} rewards)`,
    stableText: `${formatAmount(mean(stable))} (${stable.rewards})`,
  };
}
