import { UsageError } from '../core/errors.js';
import { createTable } from '../core/table.js';
import { joinPredictionLog } from '../experiment/join.js';
import { EXPERIMENT_METRICS } from '../experiment/metric.js';
import { analyzeExperiment, type ReportOptions } from '../experiment/report.js';
import { formatCount, formatFigure, formatP } from '../experiment/report-format.js';
import type { ExperimentReport } from '../experiment/report-types.js';
import { numberOption } from './experiment.js';
import { integerOption } from './options.js';

export interface ExperimentReportOptions {
  log: string;
  model: string;
  metric: string;
  control?: string;
  alpha: string;
  plannedN?: string;
  test: string;
  mde?: string;
  json: boolean;
}

const TESTS = ['fixed', 'sequential'] as const;

export async function runExperimentReport(options: ExperimentReportOptions): Promise<void> {
  const settings = reportOptions(options);
  const report = analyzeExperiment(await joinPredictionLog(options.log, options.model), settings);
  process.stdout.write(options.json ? `${JSON.stringify(report, null, 2)}\n` : renderExperimentReport(report));
}

/** The flags checked before the log is read, so a typo costs no pass over a large log. */
export function reportOptions(options: ExperimentReportOptions): ReportOptions {
  const metric = oneOf(options.metric, EXPERIMENT_METRICS, '--metric');
  const test = oneOf(options.test, TESTS, '--test');
  const alpha = numberOption(options.alpha, '--alpha');
  if (!(alpha > 0 && alpha < 1)) throw new UsageError(`--alpha: expected a number between 0 and 1, got ${alpha}`);
  const settings: ReportOptions = { metric, test, alpha };
  if (options.control !== undefined) settings.control = options.control;
  if (options.plannedN !== undefined) settings.plannedN = integerOption(options.plannedN, '--planned-n', 1);
  if (options.mde !== undefined) {
    const mde = numberOption(options.mde, '--mde');
    if (mde === 0) throw new UsageError('--mde: expected a nonzero effect');
    settings.mde = mde;
  }
  return settings;
}

function oneOf<T extends string>(value: string, allowed: readonly T[], flag: string): T {
  if (!(allowed as readonly string[]).includes(value)) {
    throw new UsageError(`${flag}: expected one of ${allowed.join(', ')}, got "${value}"`);
  }
  return value as T;
}

export function renderExperimentReport(report: ExperimentReport): string {
  const { log } = report;
  const rate = report.kind === 'rate';
  const unit = report.metric === 'latency' ? ' ms' : '';
  const estimate = (x: number): string => (rate ? `${(x * 100).toFixed(2)}%` : `${formatFigure(x)}${unit}`);
  const difference = (x: number): string =>
    `${x > 0 ? '+' : ''}${rate ? `${(x * 100).toFixed(2)} pp` : `${formatFigure(x)}${unit}`}`;
  const lines = [
    `model ${report.model}, metric ${report.metric} (${report.better} is better), control ${report.control}`,
    `log: ${plural(log.files, 'file')}, ${plural(log.served_predictions, 'served prediction')}, ` +
      `${plural(log.feedback_records, 'feedback record')}; ${plural(log.shadow_records, 'shadow record')} left out`,
  ];
  if (log.skipped_lines > 0) lines.push(`${plural(log.skipped_lines, 'line')} skipped: not records`);
  if (log.unjoined_feedback > 0) {
    lines.push(`${plural(log.unjoined_feedback, 'feedback id')} unjoined: no served prediction in the files read`);
  }
  if (report.metric === 'reward' && rate) lines.push('binary reward: compared as a rate');
  if (report.variants.length > 2) {
    lines.push(
      `alpha ${report.alpha}, Bonferroni over ${report.comparisons.length} comparisons with the control: ` +
        `${formatFigure(report.alpha_per_comparison)} each`,
    );
  }

  const variants = createTable(['version', 'n', `${rate ? 'rate' : 'mean'} (95% CI)`, 'requests', 'error rate', 'p99']);
  for (const variant of report.variants) {
    variants.push([
      variant.control ? `${variant.version} (control)` : variant.version,
      formatCount(variant.n),
      `${estimate(variant.estimate)} (${estimate(variant.ci[0])} to ${estimate(variant.ci[1])})`,
      formatCount(variant.requests),
      `${(variant.error_rate * 100).toFixed(2)}%`,
      `${variant.p99_latency_ms.toFixed(1)} ms`,
    ]);
  }
  lines.push(variants.toString());

  const confidence = formatFigure((report.comparisons[0]?.ci_confidence ?? 0.95) * 100);
  const comparisons = createTable([
    `vs control ${report.control}`,
    `difference (${confidence}% CI)`,
    `p, ${report.test.fixed}`,
    'p, always valid (mSPRT)',
  ]);
  for (const comparison of report.comparisons) {
    comparisons.push([
      comparison.version,
      `${difference(comparison.difference)} (${difference(comparison.ci[0])} to ${difference(comparison.ci[1])})`,
      formatP(comparison.fixed_p_value),
      formatP(comparison.sequential_p_value),
    ]);
  }
  lines.push(comparisons.toString());
  lines.push(`test: ${report.test.description}`);
  lines.push(`verdict: ${report.verdict.text}`);
  return `${lines.join('\n')}\n`;
}

function plural(n: number, noun: string): string {
  return `${formatCount(n)} ${noun}${n === 1 ? '' : 's'}`;
}
