import { UsageError } from '../core/errors.js';
import { meanSampleSize, rateSampleSize, type SamplePlan } from '../experiment/sample-size.js';
import { integerOption } from './options.js';

export interface ExperimentPlanOptions {
  baseline: string;
  mde: string;
  relative: boolean;
  alpha: string;
  power: string;
  variants: string;
  sd?: string;
  json: boolean;
}

/** What `experiment plan --json` prints. */
export interface ExperimentPlan extends SamplePlan {
  metric: 'rate' | 'mean';
  baseline: number;
  /** The treatment's value the plan is sized to detect. */
  target: number;
  /** target − baseline. */
  difference: number;
  sd?: number;
  alpha: number;
  power: number;
  variants: number;
}

export function runExperimentPlan(options: ExperimentPlanOptions): void {
  const plan = planExperiment(options);
  process.stdout.write(options.json ? `${JSON.stringify(plan, null, 2)}\n` : renderPlan(plan));
}

export function planExperiment(options: ExperimentPlanOptions): ExperimentPlan {
  const baseline = numberOption(options.baseline, '--baseline');
  const mde = numberOption(options.mde, '--mde');
  const alpha = numberOption(options.alpha, '--alpha');
  const power = numberOption(options.power, '--power');
  const variants = integerOption(options.variants, '--variants', 2);
  if (!(alpha > 0 && alpha < 1)) throw new UsageError(`--alpha: expected a number between 0 and 1, got ${alpha}`);
  if (!(power > 0 && power < 1)) throw new UsageError(`--power: expected a number between 0 and 1, got ${power}`);
  if (mde === 0) throw new UsageError('--mde: expected a nonzero effect');
  const difference = options.relative ? mde * baseline : mde;
  const target = baseline + difference;
  const settings = { alpha, power, variants };
  if (options.sd !== undefined) {
    const sd = numberOption(options.sd, '--sd');
    if (!(sd > 0)) throw new UsageError(`--sd: expected a standard deviation > 0, got ${sd}`);
    if (difference === 0) throw new UsageError('--mde: a relative effect on a zero baseline is zero');
    return {
      metric: 'mean',
      baseline,
      target,
      difference,
      sd,
      ...settings,
      ...meanSampleSize(difference, sd, settings),
    };
  }
  if (!(baseline > 0 && baseline < 1)) {
    throw new UsageError(`--baseline: expected a rate between 0 and 1 (or pass --sd for a mean), got ${baseline}`);
  }
  if (!(target > 0 && target < 1)) {
    throw new UsageError(`--mde: the rate to detect, ${target}, must lie between 0 and 1`);
  }
  return { metric: 'rate', baseline, target, difference, ...settings, ...rateSampleSize(baseline, target, settings) };
}

/** A number flag value, refused with a one-line usage error when it is not one. */
export function numberOption(value: string, flag: string): number {
  const number = Number(value);
  if (value.trim() === '' || !Number.isFinite(number))
    throw new UsageError(`${flag}: expected a number, got "${value}"`);
  return number;
}

export function renderPlan(plan: ExperimentPlan): string {
  const count = (n: number): string => n.toLocaleString('en-US');
  const value = (x: number): string => (plan.metric === 'rate' ? `${round(x * 100)}%` : String(round(x)));
  const sign = plan.difference > 0 ? '+' : '';
  const unit = plan.metric === 'rate' ? ' pp' : '';
  const change = plan.metric === 'rate' ? round(plan.difference * 100) : round(plan.difference);
  const lines = [
    `${plan.metric} metric: ${value(plan.baseline)} → ${value(plan.target)} (${sign}${change}${unit})` +
      (plan.sd === undefined ? '' : `, standard deviation ${round(plan.sd)}`),
    `two-sided alpha ${plan.alpha}, power ${plan.power}, ${plan.variants} variants` +
      (plan.variants > 2
        ? ` (Bonferroni: alpha ${round(plan.alphaPerComparison)} per comparison with the control)`
        : ''),
    `sample size: ${count(plan.perVariant)} per variant, ${count(plan.total)} in total`,
  ];
  return `${lines.join('\n')}\n`;
}

function round(x: number): number {
  return Number(x.toPrecision(6));
}
