/**
 * The bench report as one self-contained HTML page: it must open from a CI artifact or an
 * e-mail with no network, so the charts are inline SVG drawn here, the CSS is inline, and a
 * Content-Security-Policy forbids loading anything at all.
 */
import type Table from 'cli-table3';
import { predictedSpeedup } from './fit.js';
import type { BenchReport, PointResult } from './report-types.js';
import {
  FIT_LABELS,
  SPEEDUP_ALIGN,
  SPEEDUP_COLUMNS,
  describePlan,
  describePoint,
  describeRecommendation,
  describeServer,
  fitSummary,
  formatCeiling,
  noFitReason,
  pointTable,
  speedupCaption,
  speedupCells,
} from './report-table.js';

const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#59a14f', '#b07aa1', '#76b7b2', '#edc948', '#9c755f', '#ff9da7'];

const STYLE = `
body { font: 14px/1.45 system-ui, sans-serif; color: #222; margin: 2rem auto; max-width: 1100px; padding: 0 1rem; }
h1 { font-size: 1.5rem; margin-bottom: .25rem; } h2 { font-size: 1.15rem; margin-top: 2rem; }
.meta { color: #555; margin-top: 0; }
table { border-collapse: collapse; margin: .5rem 0; font-variant-numeric: tabular-nums; }
th, td { border-bottom: 1px solid #ddd; padding: .25rem .6rem; text-align: right; white-space: nowrap; }
th { background: #f4f4f4; } .left { text-align: left; } .center { text-align: center; }
figure { margin: 1rem 0; } figcaption { color: #555; font-size: .9rem; }
svg { max-width: 100%; height: auto; font: 12px system-ui, sans-serif; }
pre { background: #f6f6f6; padding: .75rem; display: inline-block; }
.warn li { color: #a33; }
`;

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

export function renderHtml(report: BenchReport): string {
  const model = escapeHtml(report.target.model);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>Bench: ${model}</title>
<style>${STYLE}</style>
</head>
<body>
<h1>Bench: ${model}</h1>
${summaryHeader(report)}
${recommendationSection(report)}
${planSection(report)}
${report.warnings.length === 0 ? '' : `<h2>Warnings</h2>\n${htmlList(report.warnings, 'warn')}`}
<h2>Throughput and tail latency</h2>
${latencyChart(report.points)}
<h2>Cost of a forward pass</h2>
${batchCostChart(report)}
${htmlList(fitSummary(report))}
<h2>Speedup from batching</h2>
${speedupChart(report)}
${report.speedup.length > 0 ? `<p>${escapeHtml(speedupCaption(report))}</p>\n${htmlTable(SPEEDUP_COLUMNS, report.speedup.map(speedupCells), SPEEDUP_ALIGN)}` : ''}
<h2>Results</h2>
${htmlPointTable(report.points)}
</body>
</html>
`;
}

function recommendationSection(report: BenchReport): string {
  const text = describeRecommendation(report);
  if (text === undefined || !report.recommendation) return '';
  return `<h2>Recommendation</h2>\n<p>${escapeHtml(text)}</p>\n<pre>${escapeHtml(report.recommendation.snippet)}</pre>`;
}

function planSection(report: BenchReport): string {
  if (!report.plan) return '';
  const { heading, lines } = describePlan(report.plan);
  return `<h2>Capacity plan</h2>\n<p>${escapeHtml(heading)}</p>\n${htmlList(lines)}`;
}

function htmlList(items: readonly string[], className?: string): string {
  const attribute = className === undefined ? '' : ` class="${className}"`;
  return `<ul${attribute}>${items.map((item) => `<li>${escapeHtml(item)}</li>`).join('')}</ul>`;
}

function summaryHeader(report: BenchReport): string {
  const { target, environment: env } = report;
  const rows: [string, string | undefined][] = [
    ['target', target.url ?? target.archive],
    ['protocol', target.protocol],
    ['date', report.createdAt],
    ['versions', `batchserve ${env.batchserve}, Node ${env.node}, onnxruntime ${env.onnxruntime}`],
    ['machine', `${env.cpus} × ${env.cpuModel}, ${env.platform}`],
  ];
  return `<p class="meta">${rows
    .filter((row): row is [string, string] => row[1] !== undefined)
    .map(([name, value]) => `${name}: ${escapeHtml(value)}`)
    .join(' · ')}</p>`;
}

/** Right is the stylesheet's default alignment; only the others need a class. */
function htmlPointTable(points: readonly PointResult[]): string {
  const { columns, rows, align } = pointTable(points);
  return htmlTable(columns, rows, align);
}

function htmlTable(
  head: readonly string[],
  rows: readonly string[][],
  aligns: readonly Table.HorizontalAlignment[],
): string {
  const cell = (tag: string, text: string, i: number): string => {
    const align = aligns[i] ?? 'left';
    return `<${tag}${align === 'right' ? '' : ` class="${align}"`}>${escapeHtml(text)}</${tag}>`;
  };
  const line = (tag: string, cells: readonly string[]): string =>
    `<tr>${cells.map((text, i) => cell(tag, text, i)).join('')}</tr>`;
  return `<table>\n<thead>${line('th', head)}</thead>\n<tbody>\n${rows.map((r) => line('td', r)).join('\n')}\n</tbody>\n</table>`;
}

// --- charts -------------------------------------------------------------------

type XY = readonly [x: number, y: number];

interface Series {
  readonly name: string;
  readonly color: string;
  /** Each run is joined by a line; dots mark every point. */
  readonly runs: readonly (readonly XY[])[];
  readonly line: boolean;
  readonly dots: boolean;
  readonly dashed?: boolean;
  /** Rings instead of dots, so they stay visible where another series' dots sit. */
  readonly ring?: boolean;
  /** Hover text per dot, in the order of the flattened runs. */
  readonly tips?: readonly string[];
}

interface Chart {
  readonly id: string;
  readonly title: string;
  readonly description: string;
  readonly xLabel: string;
  readonly yLabel: string;
  readonly series: readonly Series[];
  /** A horizontal dashed line across the whole plot (the speedup ceiling). */
  readonly reference?: { readonly name: string; readonly y: number };
  readonly logY?: boolean;
  readonly empty?: string;
}

const WIDTH = 820;
const HEIGHT = 380;
const MARGIN = { left: 64, right: 260, top: 16, bottom: 52 };

function latencyChart(points: readonly PointResult[]): string {
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
      color: color(i),
      runs,
      line: true,
      dots: true,
      dashed: adaptive,
      tips,
    };
  });
  const p99s = points.map((p) => p.latency.p99).filter((v) => v > 0);
  const logY = p99s.length > 0 && Math.max(...p99s) / Math.min(...p99s) > 20;
  return svgChart({
    id: 'chart-latency',
    title: 'Throughput against p99 latency, one line per server configuration',
    description:
      'Each line joins one configuration’s load levels in order; further right is more throughput, lower is faster.',
    xLabel: 'throughput (req/s)',
    yLabel: logY ? 'p99 latency (ms, log scale)' : 'p99 latency (ms)',
    series,
    logY,
    ...(points.length === 0 ? { empty: 'no points were measured' } : {}),
  });
}

function loadLevel(point: PointResult): number {
  return point.load.kind === 'concurrency' ? point.load.concurrency : point.load.rate;
}

/** Both fits on one chart, each named: how far the served passes sit from the session's own. */
function batchCostChart(report: BenchReport): string {
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
      color: color(i),
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
            color: color(i),
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
        : { name: `${label} failed: ${f.failure}`, color: color(i), runs: [], line: false, dots: false };
    return [measured, line];
  });
  return svgChart({
    id: 'chart-batch-cost',
    title: 'Forward-pass time T(B) by batch size, with the fitted line c + m·B',
    description: 'Dots are mean compute times per batch size; the line crosses B = 0 at c, the fixed cost per pass.',
    xLabel: 'batch size B (rows per forward pass)',
    yLabel: 'T(B) (ms)',
    series,
    ...(series.length === 0 ? { empty: noFitReason(report) } : {}),
  });
}

/**
 * Measured speedups, and the prediction of one fit only: the one the speedup table uses
 * (report.speedupFit), named in the legend, so the curve, the ceiling and the rings agree
 * with the table beneath.
 */
function speedupChart(report: BenchReport): string {
  const { speedup, speedupFit } = report;
  const fit = speedupFit && report[speedupFit];
  const measured = speedup.flatMap((r): XY[] => (r.measured === undefined ? [] : [[r.batchSize, r.measured]]));
  // Measured first: the legend entries after the fit's name are the fit's own.
  const series: Series[] =
    measured.length > 0 ? [{ name: 'measured', color: color(2), runs: [measured], line: true, dots: true }] : [];
  let reference: Chart['reference'];
  if (speedupFit && fit && speedup.length > 0) {
    const label = FIT_LABELS[speedupFit];
    const named = (name: string): Series => ({ name, color: '#888', runs: [], line: false, dots: false });
    if (fit.ceiling === undefined) {
      series.push(named(`${label} failed (${fit.failure ?? ''})`));
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
        { name: 'predicted S(B)', color: color(0), runs: [curve], line: true, dots: false },
        { name: 'achievable at the load', color: color(3), runs: [bounds], line: false, dots: true, ring: true },
      );
      const highest = Math.max(...curve.map(([, y]) => y), ...measured.map(([, y]) => y));
      // A ceiling far above the curves would squash them flat; it is then named, not drawn.
      if (fit.ceiling <= 3 * highest) {
        reference = { name: `ceiling 1 + c/m = ${formatCeiling(fit.ceiling)}`, y: fit.ceiling };
      } else {
        series.push({ ...named(`ceiling ${formatCeiling(fit.ceiling)}, off the chart`), line: true, dashed: true });
      }
    }
  }
  return svgChart({
    id: 'chart-speedup',
    title: speedupFit
      ? `Speedup S(B) from batching: measured, and predicted by the ${FIT_LABELS[speedupFit]}`
      : 'Speedup S(B) from batching, measured',
    description:
      'Measured is best throughput at max_batch_size B over best at B = 1; the dashed line is the most batching can give.',
    xLabel: 'max_batch_size B',
    yLabel: 'speedup S(B) (×)',
    series,
    ...(reference ? { reference } : {}),
    ...(series.length === 0 ? { empty: 'no fit and no max_batch_size 1 point to compare with' } : {}),
  });
}

function color(index: number): string {
  return PALETTE[index % PALETTE.length] as string;
}

// --- drawing ------------------------------------------------------------------

interface Axis {
  readonly ticks: readonly number[];
  readonly toPixel: (value: number) => number;
}

function svgChart(chart: Chart): string {
  const plotRight = WIDTH - MARGIN.right;
  const plotBottom = HEIGHT - MARGIN.bottom;
  const all = chart.series.flatMap((s) => s.runs.flat());
  const ys = [...all.map(([, y]) => y), ...(chart.reference ? [chart.reference.y] : [])];
  const x = linearAxis(Math.max(0, ...all.map(([v]) => v)), MARGIN.left, plotRight);
  const y =
    chart.logY === true
      ? logAxis(
          ys.filter((v) => v > 0),
          plotBottom,
          MARGIN.top,
        )
      : linearAxis(Math.max(0, ...ys), plotBottom, MARGIN.top);
  const parts: string[] = [
    `<title id="${chart.id}-title">${escapeHtml(chart.title)}</title>`,
    `<desc id="${chart.id}-desc">${escapeHtml(chart.description)}</desc>`,
    `<rect x="${MARGIN.left}" y="${MARGIN.top}" width="${plotRight - MARGIN.left}" height="${plotBottom - MARGIN.top}" fill="#fcfcfc" stroke="#ccc"/>`,
    ...x.ticks.map((t) => {
      const px = fixed(x.toPixel(t));
      return `<line x1="${px}" x2="${px}" y1="${MARGIN.top}" y2="${plotBottom}" stroke="#eee"/><text x="${px}" y="${plotBottom + 16}" text-anchor="middle">${tickLabel(t)}</text>`;
    }),
    ...y.ticks.map((t) => {
      const py = fixed(y.toPixel(t));
      return `<line x1="${MARGIN.left}" x2="${plotRight}" y1="${py}" y2="${py}" stroke="#eee"/><text x="${MARGIN.left - 6}" y="${py}" dy="4" text-anchor="end">${tickLabel(t)}</text>`;
    }),
    `<text x="${(MARGIN.left + plotRight) / 2}" y="${HEIGHT - 12}" text-anchor="middle">${escapeHtml(chart.xLabel)}</text>`,
    `<text transform="translate(16 ${(MARGIN.top + plotBottom) / 2}) rotate(-90)" text-anchor="middle">${escapeHtml(chart.yLabel)}</text>`,
  ];
  if (chart.empty !== undefined) {
    parts.push(
      `<text x="${(MARGIN.left + plotRight) / 2}" y="${(MARGIN.top + plotBottom) / 2}" text-anchor="middle" fill="#888">${escapeHtml(chart.empty)}</text>`,
    );
  }
  if (chart.reference) {
    const py = fixed(y.toPixel(chart.reference.y));
    parts.push(
      `<line x1="${MARGIN.left}" x2="${plotRight}" y1="${py}" y2="${py}" stroke="#555" stroke-dasharray="6 4"/>`,
    );
  }
  for (const s of chart.series) parts.push(drawSeries(s, x, y));
  parts.push(legend(chart));
  return `<figure>\n<svg viewBox="0 0 ${WIDTH} ${HEIGHT}" width="${WIDTH}" height="${HEIGHT}" role="img" aria-label="${escapeHtml(chart.title)}" aria-labelledby="${chart.id}-title ${chart.id}-desc">\n${parts.join('\n')}\n</svg>\n<figcaption>${escapeHtml(chart.description)}</figcaption>\n</figure>`;
}

function drawSeries(s: Series, x: Axis, y: Axis): string {
  const at = ([vx, vy]: XY): [string, string] => [fixed(x.toPixel(vx)), fixed(y.toPixel(vy))];
  const lines = s.line
    ? s.runs.map(
        (run) => `<polyline points="${run.map((point) => at(point).join(',')).join(' ')}" fill="none" ${stroke(s)}/>`,
      )
    : [];
  const dots = s.dots
    ? s.runs.flat().map((point, i) => {
        const tip = s.tips?.[i];
        return marker(s, ...at(point), tip === undefined ? '' : `<title>${escapeHtml(tip)}</title>`);
      })
    : [];
  return `<g>${[...lines, ...dots].join('')}</g>`;
}

function stroke(s: Pick<Series, 'color' | 'dashed'>): string {
  return `stroke="${s.color}" stroke-width="2"${s.dashed === true ? ' stroke-dasharray="6 4"' : ''}`;
}

function marker(s: Pick<Series, 'color' | 'ring'>, cx: string, cy: string, inside = ''): string {
  const paint =
    s.ring === true
      ? `r="6" fill="none" stroke="${s.color}" stroke-width="2"`
      : `r="4" fill="${s.color}" stroke="#fff"`;
  return `<circle cx="${cx}" cy="${cy}" ${paint}>${inside}</circle>`;
}

function legend(chart: Chart): string {
  const entries: Series[] = [...chart.series];
  if (chart.reference) {
    entries.push({ name: chart.reference.name, color: '#555', runs: [], line: true, dots: false, dashed: true });
  }
  const left = WIDTH - MARGIN.right + 14;
  return `<g>${entries
    .map((e, i) => {
      const cy = MARGIN.top + 10 + i * 20;
      const line = e.line ? `<line x1="${left}" x2="${left + 22}" y1="${cy}" y2="${cy}" ${stroke(e)}/>` : '';
      const dot = e.dots ? marker(e, String(left + 11), String(cy)) : '';
      return `${line}${dot}<text x="${left + 30}" y="${cy}" dy="4">${escapeHtml(e.name)}</text>`;
    })
    .join('')}</g>`;
}

/** 0 to a round number at or above `max`, in steps of 1, 2 or 5 × 10^k. */
function linearAxis(max: number, from: number, to: number): Axis {
  const raw = (max > 0 ? max : 1) / 5;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = ([1, 2, 5, 10].find((f) => f * magnitude >= raw) ?? 10) * magnitude;
  const top = Math.ceil((max > 0 ? max : 1) / step) * step;
  const ticks = Array.from({ length: Math.round(top / step) + 1 }, (_, i) => i * step);
  return { ticks, toPixel: (v) => from + ((to - from) * v) / top };
}

/** Whole decades around the values, with 2 and 5 between them when there are few decades. */
function logAxis(values: readonly number[], from: number, to: number): Axis {
  const low = Math.floor(Math.log10(Math.min(...values)));
  const high = Math.max(low + 1, Math.ceil(Math.log10(Math.max(...values))));
  const decades = Array.from({ length: high - low + 1 }, (_, i) => 10 ** (low + i));
  const ticks = high - low <= 2 ? decades.flatMap((d) => [d, 2 * d, 5 * d]).filter((t) => t <= 10 ** high) : decades;
  return { ticks, toPixel: (v) => from + ((to - from) * (Math.log10(Math.max(v, 10 ** low)) - low)) / (high - low) };
}

function tickLabel(value: number): string {
  return String(Number(value.toPrecision(6)));
}

function fixed(pixel: number): string {
  return pixel.toFixed(1);
}
