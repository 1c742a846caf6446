/**
 * When a load level may stop, and why a point is or is not stable: the load generator stops a
 * level once its last windows agree (`isStable`), and a report says which figure moved, and
 * by how much, instead of a bare "not stable" (`windowVariation`, `instabilityReason`). One
 * measure serves both, so the table's reason is the rule's own.
 */
import type { WindowVariation } from './report-types.js';

/** What one measured window of a load level showed. */
export interface WindowFigures {
  readonly throughput: number;
  readonly p99Ms: number;
  /** Requests completed per second, any outcome: successes and errors. */
  readonly completedPerSecond: number;
}

/**
 * Whether the last `minWindows` windows agree: throughput, p99 and the rate of completions
 * (errors too) each within ±`pct`% of their mean over those windows. Throughput and p99 count
 * successes only, so without the completions a run whose every request fails would agree on
 * 0 req/s and p99 0 at once, however its errors came. A window in which nothing completed
 * measured nothing (the server stalled, or is still working through the warm-up's queue), so
 * it is never stable.
 */
export function isStable(windows: readonly WindowFigures[], minWindows: number, pct: number): boolean {
  if (minWindows < 1) return false;
  const variation = windowVariation(windows, minWindows, pct);
  return (
    variation.compared === minWindows &&
    variation.emptyWindows === 0 &&
    variation.throughputPct <= pct &&
    variation.p99Pct <= pct &&
    variation.completedPct <= pct
  );
}

/** Over the last `required` full windows: each figure's largest distance from its mean, % of the mean. */
export function windowVariation(
  fullWindows: readonly WindowFigures[],
  required: number,
  limitPct: number,
): Required<WindowVariation> {
  const last = fullWindows.slice(-required);
  return {
    compared: last.length,
    required,
    limitPct,
    throughputPct: spreadPct(last.map((window) => window.throughput)),
    p99Pct: spreadPct(last.map((window) => window.p99Ms)),
    completedPct: spreadPct(last.map((window) => window.completedPerSecond)),
    emptyWindows: last.filter((window) => window.completedPerSecond === 0).length,
  };
}

function spreadPct(values: readonly number[]): number {
  if (values.length === 0) return 0;
  const mean = values.reduce((sum, value) => sum + value, 0) / values.length;
  if (mean === 0) return 0;
  return (100 * Math.max(...values.map((value) => Math.abs(value - mean)))) / mean;
}

/**
 * The figures that broke the rule, for the table's `stable` column: "p99 ±23%",
 * "req/s ±14%, p99 ±31%", "completed/s ±40%" (the errors' rate moved), "2 of 3 windows" when
 * the run ended before the rule could judge, or "1 of 3 windows empty" when nothing completed
 * in some of them.
 */
export function instabilityReason(variation: WindowVariation): string {
  if (variation.compared < variation.required) return `${variation.compared} of ${variation.required} windows`;
  const empty = variation.emptyWindows ?? 0;
  if (empty > 0) return `${empty} of ${variation.required} windows empty`;
  const figures: [string, number][] = [
    ['req/s', variation.throughputPct],
    ['p99', variation.p99Pct],
  ];
  if (variation.completedPct !== undefined) figures.push(['completed/s', variation.completedPct]);
  const beyond = figures.filter(([, pct]) => pct > variation.limitPct);
  // All within the limit only when the last, cut-short window was judged otherwise by the load
  // generator: show them all rather than nothing.
  return (beyond.length > 0 ? beyond : figures).map(([name, pct]) => `${name} ±${formatPct(pct)}%`).join(', ');
}

function formatPct(pct: number): string {
  return pct >= 10 ? pct.toFixed(0) : pct.toFixed(1);
}
