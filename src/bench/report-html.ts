/**
 * The bench report as one self-contained HTML page: it must open from a CI artifact or an
 * e-mail with no network, so the charts are inline SVG (report-charts.ts), the CSS is inline,
 * and a Content-Security-Policy forbids loading anything at all.
 */
import type Table from 'cli-table3';
import type { BenchReport, PointResult } from './report-types.js';
import { batchCostChart, latencyChart, speedupChart } from './report-charts.js';
import {
  SPEEDUP_ALIGN,
  SPEEDUP_COLUMNS,
  describePlan,
  describePoint,
  describeRecommendation,
  fitSummary,
  pointTable,
  speedupCaption,
  speedupCells,
  stabilityLabel,
} from './report-table.js';
import { escapeHtml } from './report-svg.js';

const STYLE = `
body { font: 14px/1.45 system-ui, sans-serif; color: #222; margin: 2rem auto; max-width: 1100px; padding: 0 1rem; }
h1 { font-size: 1.5rem; margin-bottom: .25rem; } h2 { font-size: 1.15rem; margin-top: 2rem; }
.meta { color: #555; margin-top: 0; }
.table-scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: .5rem 0; font-variant-numeric: tabular-nums; font-size: .9rem; }
th, td { border-bottom: 1px solid #ddd; padding: .2rem .45rem; text-align: right; white-space: nowrap; }
th { background: #f4f4f4; } .left { text-align: left; } .center { text-align: center; }
figure { margin: 1rem 0; } figcaption { color: #555; font-size: .9rem; }
svg { max-width: 100%; height: auto; font: 12px system-ui, sans-serif; }
pre { background: #f6f6f6; padding: .75rem; display: inline-block; }
.warn li { color: #a33; }
.recommendation .stable { color: #17633a; } .recommendation .unstable { color: #a33; }
`;

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
${latencyChart(report)}
<h2>Cost of a forward pass</h2>
${batchCostChart(report)}
${htmlList(fitSummary(report))}
<h2>Speedup from batching</h2>
${speedupChart(report)}
${report.speedup.length > 0 ? `<p>${escapeHtml(speedupCaption(report))}</p>\n${htmlTable('speedup by max_batch_size', SPEEDUP_COLUMNS, report.speedup.map(speedupCells), SPEEDUP_ALIGN)}` : ''}
<h2>Results</h2>
${htmlPointTable(report.points)}
</body>
</html>
`;
}

/**
 * The one recommendation, its stability in bold, as `data-recommendation` for scripts and
 * tests; with --plan it is the plan's configuration (buildReport), so the two sections agree.
 */
function recommendationSection(report: BenchReport): string {
  const text = describeRecommendation(report);
  if (text === undefined || !report.recommendation) return '';
  const { point, snippet } = report.recommendation;
  const label = escapeHtml(stabilityLabel(point));
  const stability = point.stable ? 'stable' : 'unstable';
  const statement = escapeHtml(text).replace(label, `<strong class="${stability}">${label}</strong>`);
  return (
    `<h2>Recommendation</h2>\n<p class="recommendation" data-recommendation="${escapeHtml(describePoint(point))}" data-stability="${stability}">${statement}</p>\n` +
    `<pre>${escapeHtml(snippet)}</pre>`
  );
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

function htmlPointTable(points: readonly PointResult[]): string {
  const { columns, rows, align } = pointTable(points);
  return htmlTable('results, one row per point', columns, rows, align);
}

/**
 * Right is the stylesheet's default alignment; only the others need a class. A table wider
 * than the window (a dozen columns of figures, a long stable reason) scrolls in its own box,
 * which the keyboard can reach and a screen reader names, rather than widening the page.
 */
function htmlTable(
  name: string,
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
  return (
    `<div class="table-scroll" role="region" tabindex="0" aria-label="${escapeHtml(name)}">\n` +
    `<table>\n<thead>${line('th', head)}</thead>\n<tbody>\n${rows.map((r) => line('td', r)).join('\n')}\n</tbody>\n</table>\n</div>`
  );
}
