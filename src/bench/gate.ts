/**
 * The bench as a CI gate: `--fail-on` thresholds and a comparison with a baseline report.
 * checkGate only lists violations, each naming the figure, the limit and the point; the CLI
 * decides what failing means (BenchGateError, exit 1).
 *
 * Which points a threshold applies to:
 * - throughput, items and the latencies: the best point, i.e. the recommendation when the run
 *   had a p99 objective and some point met it, else the highest-throughput point. A sweep
 *   deliberately drives some points into overload; failing on those would fail every run.
 * - errors and error_rate: every point, since an error anywhere is a served request lost.
 */
import { UsageError } from '../core/errors.js';
import { describePoint, formatErrors, round } from './report-table.js';
import type { BenchReport, PointResult } from './report-types.js';

export type GateMetric = 'p50' | 'p90' | 'p99' | 'p999' | 'throughput' | 'items' | 'errors' | 'error_rate';
export type GateOp = '<' | '>' | '<=' | '>=';

/** Fails when `metric op value` holds. Latencies in ms; error_rate in percent of requests. */
export interface GateRule {
  readonly metric: GateMetric;
  readonly op: GateOp;
  readonly value: number;
}

const METRICS: readonly GateMetric[] = ['p50', 'p90', 'p99', 'p999', 'throughput', 'items', 'errors', 'error_rate'];
const LATENCY_MS: Readonly<Record<string, number>> = { '': 1, ms: 1, s: 1000, us: 0.001, µs: 0.001 };
/** Units each kind of metric accepts, with the factor into the rule's unit. */
const UNITS: Readonly<Record<GateMetric, Readonly<Record<string, number>>>> = {
  p50: LATENCY_MS,
  p90: LATENCY_MS,
  p99: LATENCY_MS,
  p999: LATENCY_MS,
  throughput: { '': 1, '/s': 1 },
  items: { '': 1, '/s': 1 },
  errors: { '': 1 },
  error_rate: { '': 1, '%': 1 },
};
const RULE = /^([a-z0-9_.]+)\s*(<=|>=|<|>)\s*(\d+(?:\.\d+)?|\.\d+)\s*(\S*)$/i;
const EXAMPLE = 'e.g. p99>50ms,throughput<1000,errors>0';

/** `p99>50ms,throughput<1000,errors>0`; every bad rule is reported at once. */
export function parseFailOn(spec: string): GateRule[] {
  const parts = spec
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean);
  if (parts.length === 0) throw new UsageError(`--fail-on: no rules given; ${EXAMPLE}`);
  const rules: GateRule[] = [];
  const problems: string[] = [];
  for (const part of parts) {
    const rule = parseRule(part);
    if (typeof rule === 'string') problems.push(rule);
    else rules.push(rule);
  }
  if (problems.length > 0) throw new UsageError(`--fail-on: ${problems.join('; ')}`);
  return rules;
}

/** The rule, or what is wrong with it. */
function parseRule(text: string): GateRule | string {
  const match = RULE.exec(text);
  if (!match) return `"${text}" is not METRIC OP VALUE (${EXAMPLE})`;
  const [, name = '', op = '', number = '', unit = ''] = match;
  const metric = name.toLowerCase() === 'p99.9' ? 'p999' : name.toLowerCase();
  if (!isMetric(metric)) return `"${text}": unknown metric "${name}"; use one of ${METRICS.join(', ')}`;
  const factor = UNITS[metric][unit.toLowerCase()];
  if (factor === undefined) {
    const allowed = Object.keys(UNITS[metric]).filter(Boolean);
    const hint = allowed.length === 0 ? 'a plain number' : `a plain number or one of ${allowed.join(', ')}`;
    return `"${text}": ${metric} takes ${hint}, not "${unit}"`;
  }
  return { metric, op: op as GateOp, value: Number(number) * factor };
}

function isMetric(name: string): name is GateMetric {
  return (METRICS as readonly string[]).includes(name);
}

/** `10%` or `10` → 10. `flag` names the option in the error. */
export function parseRegression(text: string, flag = '--max-regression'): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*%?\s*$/.exec(text);
  if (!match) throw new UsageError(`${flag}: expected a percentage such as 10%, got "${text}"`);
  return Number(match[1]);
}

/**
 * Every violation of `rules`, then every regression against `baseline`: points matched by
 * server configuration and load (client batch included) whose throughput fell, or whose p99
 * rose, by more than `maxRegressionPct` percent.
 */
export function checkGate(
  report: BenchReport,
  rules: readonly GateRule[],
  baseline?: BenchReport,
  maxRegressionPct = 10,
): string[] {
  if (rules.length === 0 && !baseline) return [];
  if (report.points.length === 0) return ['the report has no points to check'];
  const best = bestPoint(report);
  const violations: string[] = [];
  for (const rule of rules) {
    const aboutErrors = rule.metric === 'errors' || rule.metric === 'error_rate';
    for (const point of aboutErrors ? report.points : [best]) {
      const value = measure(point, rule.metric);
      if (!holds(value, rule.op, rule.value)) continue;
      const errors = aboutErrors ? ` (${formatErrors(point.errors)})` : '';
      violations.push(
        `${label(rule.metric)} ${show(rule.metric, value)} ${rule.op} ${show(rule.metric, rule.value)} ` +
          `at ${describePoint(point)}${errors}`,
      );
    }
  }
  if (baseline) violations.push(...regressions(report, baseline, maxRegressionPct));
  return violations;
}

function bestPoint(report: BenchReport): PointResult {
  if (report.recommendation) return report.recommendation.point;
  return report.points.reduce((best, point) => (point.throughput > best.throughput ? point : best));
}

function measure(point: PointResult, metric: GateMetric): number {
  switch (metric) {
    case 'throughput':
      return point.throughput;
    case 'items':
      return point.itemsPerSecond;
    case 'errors':
      return point.errorCount;
    case 'error_rate':
      // Connection errors may never count as completed requests; never report above 100%.
      return point.errorCount === 0 ? 0 : (100 * point.errorCount) / Math.max(point.requests, point.errorCount);
    default:
      return point.latency[metric];
  }
}

function holds(value: number, op: GateOp, limit: number): boolean {
  switch (op) {
    case '<':
      return value < limit;
    case '<=':
      return value <= limit;
    case '>':
      return value > limit;
    case '>=':
      return value >= limit;
  }
}

function label(metric: GateMetric): string {
  return metric === 'p999' ? 'p99.9' : metric;
}

function show(metric: GateMetric, value: number): string {
  switch (metric) {
    case 'throughput':
      return `${round(value, 1)} req/s`;
    case 'items':
      return `${round(value, 1)} items/s`;
    case 'errors':
      return String(value);
    case 'error_rate':
      return `${round(value, 2)}%`;
    default:
      return `${round(value, 2)} ms`;
  }
}

function pointKey(point: PointResult): string {
  const { server, load } = point;
  const level = load.kind === 'concurrency' ? [load.concurrency] : [load.rate, load.arrival];
  return JSON.stringify([
    server?.maxBatchSize,
    server?.maxQueueDelayUs,
    server?.instances,
    load.kind,
    ...level,
    point.clientBatch,
  ]);
}

function regressions(report: BenchReport, baseline: BenchReport, maxPct: number): string[] {
  const before = new Map(baseline.points.map((point) => [pointKey(point), point]));
  const found: string[] = [];
  let compared = 0;
  for (const point of report.points) {
    const old = before.get(pointKey(point));
    if (!old) continue;
    compared += 1;
    const where = `at ${describePoint(point)} (allowed ${round(maxPct, 2)}%)`;
    const drop = old.throughput > 0 ? (100 * (old.throughput - point.throughput)) / old.throughput : 0;
    if (drop > maxPct) {
      found.push(
        `throughput ${round(point.throughput, 1)} req/s is ${drop.toFixed(1)}% below the baseline's ` +
          `${round(old.throughput, 1)} req/s ${where}`,
      );
    }
    const rise = old.latency.p99 > 0 ? (100 * (point.latency.p99 - old.latency.p99)) / old.latency.p99 : 0;
    if (rise > maxPct) {
      found.push(
        `p99 ${round(point.latency.p99, 2)} ms is ${rise.toFixed(1)}% above the baseline's ` +
          `${round(old.latency.p99, 2)} ms ${where}`,
      );
    }
  }
  // A baseline from another sweep would otherwise pass the check without comparing anything.
  if (compared === 0) found.push('the baseline has no point with the same configuration and load as this run');
  return found;
}
