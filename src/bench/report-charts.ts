/**
 * The report's three charts: throughput against p99 per configuration, the forward pass's
 * cost T(B) with each fit's line, and the speedup S(B) measured against the fit's prediction.
 */
import { predictedSpeedup } from './fit.js';
import type { BenchReport, PointResult } from './report-types.js';
import {
  FIT_LABELS,
  describePoint,
  describeServer,
  formatCeiling,
  noFitReason,
  round,
  stabilityLabel,
} from './report-table.js';
import { type Chart, type Series, type XY, look, svgChart } from './report-svg.js';

export function latencyChart(report: BenchReport): string {
  const { points, recommendation, sloP99Ms } = report;
  const configs = new Map<string, PointResult[]>();
  for (const point of points) {
    const key = describeServer(point.server);
    configs.set(key, [...(configs.get(key) ?? []), point]);
  }
  const series = [...configs].map(([name, group], i): Series => {
    // Closed- and open-loop points are different curves; each kind is joined on its own.
    const byKind = (['concurrency', 'rate'] as const)
      .map((kind) => group.filter((p) => p.load.kind === kind).sort((p, q) => loadLevel(p) - loadLevel(q)))
      .filter((run) => run.length > 0);
    const runs = byKind.map((run) => run.map((p): XY => [p.throughput, p.latency.p99]));
    const tips = byKind
      .flat()
      .map((p) => `${describePoint(p)}: ${p.throughput.toFixed(1)} req/s, p99 ${p.latency.p99.toFixed(2)} ms`);
    // Adaptive batching is a policy, not a delay: its line is dashed and named so.
    const adaptive = group[0]?.server?.maxQueueDelayUs === 'auto';
    return {
      name: adaptive ? `${name} (adaptive)` : name,
      ...look(i),
      runs,
      line: true,
      dots: true,
      dashed: adaptive,
      tips,
      points: byKind.flat().map(describePoint),
    };
  });
  // The budget counts in the scale: a line far above the points would squash them flat.
  const p99s = [...points.map((p) => p.latency.p99), ...(sloP99Ms === undefined ? [] : [sloP99Ms])].filter(
    (v) => v > 0,
  );
  const logY = p99s.length > 0 && Math.max(...p99s) / Math.min(...p99s) > 20;
  const recommended = recommendation?.point;
  return svgChart({
    id: 'chart-latency',
    title: 'Throughput against p99 latency, one line per server configuration',
    description:
      'Each line joins one configuration’s load levels in order; further right is more throughput, lower is faster.' +
      (sloP99Ms === undefined ? '' : ' The dashed line is the p99 budget.') +
      (recommended ? ' The ringed point is the recommendation.' : ''),
    xLabel: 'throughput (req/s)',
    yLabel: logY ? 'p99 latency (ms, log scale)' : 'p99 latency (ms)',
    series,
    logY,
    ...(sloP99Ms === undefined
      ? {}
      : { reference: { kind: 'slo', name: `p99 SLO ${round(sloP99Ms, 2)} ms`, y: sloP99Ms } }),
    ...(recommended
      ? {
          marked: {
            at: [recommended.throughput, recommended.latency.p99],
            point: describePoint(recommended),
            label: `recommended: ${describePoint(recommended)} (${stabilityLabel(recommended)})`,
            legend: `recommended (${recommended.stable ? 'stable' : 'UNSTABLE'})`,
          },
        }
      : {}),
    ...(points.length === 0 ? { empty: 'no points were measured' } : {}),
  });
}

function loadLevel(point: PointResult): number {
  return point.load.kind === 'concurrency' ? point.load.concurrency : point.load.rate;
}

/** Both fits on one chart, each named: how far the served passes sit from the session's own. */
export function batchCostChart(report: BenchReport): string {
  const curves = [
    { label: FIT_LABELS.fit, fit: report.fit },
    { label: FIT_LABELS.inProcess, fit: report.inProcess },
  ];
  const series = curves.flatMap(({ label, fit: f }, i): Series[] => {
    if (!f) return [];
    const maxB = Math.max(...f.samples.map((s) => s.batchSize));
    const samples = f.samples.map((s): XY => [s.batchSize, s.ms]);
    const tips = f.samples.map((s) => `${label}: B=${s.batchSize}, ${s.ms.toFixed(3)} ms over ${s.count} passes`);
    const measured: Series = {
      name: `${label}: measured`,
      ...look(i),
      runs: [samples],
      line: false,
      dots: true,
      tips,
    };
    // A failed line is named, not drawn: with c < 0 it would leave the plot below zero.
    const line: Series =
      f.failure === undefined
        ? {
            name: `${label}: c + m·B`,
            color: look(i).color,
            runs: [
              [
                [0, f.c],
                [maxB, f.c + f.m * maxB],
              ],
            ],
            line: true,
            dots: false,
            dashed: i > 0,
          }
        : { name: `${label} failed: ${f.failure}`, color: look(i).color, runs: [], line: false, dots: false };
    return [measured, line];
  });
  return svgChart({
    id: 'chart-batch-cost',
    title: 'Forward-pass time T(B) by batch size, with the fitted line c + m·B',
    description: `Dots are mean compute times per batch size; ${batchCostLines(report)}.`,
    xLabel: 'batch size B (rows per forward pass)',
    yLabel: 'T(B) (ms)',
    series,
    ...(series.length === 0 ? { empty: noFitReason(report) } : {}),
  });
}

/** What the T(B) chart's caption says of the lines: only those drawn, and why any is not. */
function batchCostLines(report: BenchReport): string {
  const fits = (['fit', 'inProcess'] as const).flatMap((key) => {
    const fit = report[key];
    return fit ? [{ key, label: FIT_LABELS[key], failure: fit.failure }] : [];
  });
  const drawn = fits.filter((f) => f.failure === undefined);
  const failed = fits.flatMap((f) => (f.failure === undefined ? [] : [`the ${f.label} failed (${f.failure})`]));
  if (fits.length === 0) return `no line: ${noFitReason(report)}`;
  if (drawn.length === 0) return `no line is drawn: ${failed.join(' and ')}`;
  const lines = [
    `${drawn.length === 1 ? 'the fitted line crosses' : 'each fitted line crosses'} B = 0 at c, the fixed cost per pass`,
    ...(drawn.some((f) => f.key === 'inProcess') && drawn.length > 1 ? ['the in-process fit’s is dashed'] : []),
    ...failed.map((failure) => `${failure} and is not drawn`),
  ];
  return lines.join('; ');
}

/**
 * Measured speedups, and the prediction of one fit only: the one the speedup table uses
 * (report.speedupFit), named in the legend, so the curve, the ceiling and the rings agree
 * with the table beneath.
 */
export function speedupChart(report: BenchReport): string {
  const { speedup, speedupFit } = report;
  const fit = speedupFit && report[speedupFit];
  const measured = speedup.flatMap((r): XY[] => (r.measured === undefined ? [] : [[r.batchSize, r.measured]]));
  // Measured first: the legend entries after the fit's name are the fit's own.
  const series: Series[] =
    measured.length > 0 ? [{ name: 'measured', ...look(2), runs: [measured], line: true, dots: true }] : [];
  let reference: Chart['reference'];
  // The caption names only the lines drawn: a dashed ceiling that is not there misleads.
  let prediction = fit ? 'no max_batch_size was measured to predict' : `no fit predicts it: ${noFitReason(report)}`;
  if (speedupFit && fit && speedup.length > 0) {
    const label = FIT_LABELS[speedupFit];
    const named = (name: string): Series => ({ name, color: '#888', runs: [], line: false, dots: false });
    if (fit.ceiling === undefined) {
      series.push(named(`${label} failed (${fit.failure ?? ''})`));
      prediction = `measured only: the ${label} failed (${fit.failure ?? ''}), so it predicts nothing`;
    } else {
      const maxB = Math.max(...speedup.map((r) => r.batchSize));
      const curve = Array.from({ length: 65 }, (_, i): XY => {
        const b = 1 + ((maxB - 1) * i) / 64;
        return [b, predictedSpeedup(fit, b)];
      });
      const bounds = speedup.flatMap((r): XY[] =>
        r.achievableBound === undefined ? [] : [[r.batchSize, r.achievableBound]],
      );
      series.push(
        named(`from the ${label}:`),
        { name: 'predicted S(B)', color: look(0).color, runs: [curve], line: true, dots: false },
        { name: 'achievable at the load', ...look(3), runs: [bounds], line: false, dots: true, ring: true },
      );
      const highest = Math.max(...curve.map(([, y]) => y), ...measured.map(([, y]) => y));
      // A ceiling far above the curves would squash them flat; it is then named, not drawn.
      if (fit.ceiling <= 3 * highest) {
        reference = { kind: 'ceiling', name: `ceiling 1 + c/m = ${formatCeiling(fit.ceiling)}`, y: fit.ceiling };
        prediction = `the curve is the ${label}’s prediction, and the dashed line its ceiling 1 + c/m, the most batching can give`;
      } else {
        series.push({ ...named(`ceiling ${formatCeiling(fit.ceiling)}, off the chart`), line: true, dashed: true });
        prediction = `the curve is the ${label}’s prediction; its ceiling 1 + c/m = ${formatCeiling(fit.ceiling)} is too far above to draw`;
      }
    }
  }
  return svgChart({
    id: 'chart-speedup',
    title: speedupFit
      ? `Speedup S(B) from batching: measured, and predicted by the ${FIT_LABELS[speedupFit]}`
      : 'Speedup S(B) from batching, measured',
    description: `Measured is best throughput at max_batch_size B over best at B = 1; ${prediction}.`,
    xLabel: 'max_batch_size B',
    yLabel: 'speedup S(B) (×)',
    series,
    ...(reference ? { reference } : {}),
    ...(series.length === 0 ? { empty: 'no fit and no max_batch_size 1 point to compare with' } : {}),
  });
}
