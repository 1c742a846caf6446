import type { Observation } from './metric.js';
import { SequentialTest, mixtureVariance, type SequentialState } from './sequential.js';

/** Looks wait until each arm has this many observations, so its variance estimate means something. */
const MIN_OBSERVATIONS_PER_ARM = 10;

/** Where the mixture's scale τ came from. */
export type TauSource = 'mde' | 'control' | 'pooled-sd';

export interface MixtureScale {
  readonly tau: number;
  readonly source: TauSource;
}

/**
 * τ for the mSPRT: the minimum detectable effect when the team planned one (`--mde`, as
 * `mixtureVariance` advises). Without it, 10 % of the control's mean or rate, a lift that
 * experiments typically look for; when that is 0 (a control with no errors), the standard
 * deviation of all observations. Undefined when every observation is the same: then there is
 * nothing to test. The p-value is valid for any τ, so the choice moves only its power.
 */
export function mixtureScale(
  mde: number | undefined,
  controlEstimate: number,
  all: readonly Observation[],
): MixtureScale | undefined {
  if (mde !== undefined) return { tau: Math.abs(mde), source: 'mde' };
  if (controlEstimate !== 0) return { tau: 0.1 * Math.abs(controlEstimate), source: 'control' };
  const sd = standardDeviation(all);
  return sd > 0 ? { tau: sd, source: 'pooled-sd' } : undefined;
}

/**
 * Replays the experiment as it happened: observations of both arms in the time order of their
 * predictions, a look at the running difference (treatment − control) after every `step` of
 * them, and the always-valid p-value kept by SequentialTest. A team that looked every day would
 * have seen each of these p-values, and none would have misled it more often than alpha.
 * The variance of the difference is p(1 − p)/n per arm for rates and s²/n for means.
 */
export function replaySequential(
  control: readonly Observation[],
  treatment: readonly Observation[],
  kind: 'rate' | 'mean',
  scale: MixtureScale | undefined,
): SequentialState {
  if (!scale) return { pValue: 1, looks: 0 };
  const test = new SequentialTest(mixtureVariance(scale.tau));
  const controlArm = new RunningMoments();
  const treatmentArm = new RunningMoments();
  const arrivals = [
    ...control.map((observation) => ({ observation, arm: controlArm })),
    ...treatment.map((observation) => ({ observation, arm: treatmentArm })),
  ].sort((a, b) => a.observation.time - b.observation.time);
  // Looking after every observation of a million-row log is slow and tells nothing new.
  const step = Math.max(1, Math.floor(arrivals.length / 1000));
  arrivals.forEach(({ observation, arm }, index) => {
    arm.add(observation.value);
    const last = index === arrivals.length - 1;
    if ((index + 1) % step !== 0 && !last) return;
    if (controlArm.n < MIN_OBSERVATIONS_PER_ARM || treatmentArm.n < MIN_OBSERVATIONS_PER_ARM) return;
    const variance = controlArm.varianceOfMean(kind) + treatmentArm.varianceOfMean(kind);
    if (variance > 0) test.look(treatmentArm.mean - controlArm.mean, variance);
  });
  return test.state;
}

/** Welford's running mean and sum of squares, stable where a sum of squares of latencies is not. */
class RunningMoments {
  n = 0;
  mean = 0;
  #squares = 0;

  add(value: number): void {
    this.n += 1;
    const delta = value - this.mean;
    this.mean += delta / this.n;
    this.#squares += delta * (value - this.mean);
  }

  /** Sample variance (n − 1 in the denominator); NaN below two values. */
  get variance(): number {
    return this.#squares / (this.n - 1);
  }

  varianceOfMean(kind: 'rate' | 'mean'): number {
    return (kind === 'rate' ? this.mean * (1 - this.mean) : this.variance) / this.n;
  }
}

function standardDeviation(values: readonly Observation[]): number {
  const moments = new RunningMoments();
  for (const { value } of values) moments.add(value);
  return Math.sqrt(moments.variance);
}
