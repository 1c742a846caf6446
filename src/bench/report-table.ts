/**
 * The bench report as text: a terminal table, Markdown for pull requests and CSV for
 * spreadsheets. The labels and cells here are shared with the HTML report and the gate so a
 * point reads the same everywhere ("B=16 d=2ms i=1, c=8").
 */
import type Table from 'cli-table3';
import { createTable } from '../core/table.js';
import { formatDelay } from './delay.js';
import { instabilityReason } from './stability.js';
import type {
  BatchCostFit,
  BenchReport,
  CapacityPlan,
  FitFailure,
  GpuUse,
  LoadLevel,
  PointResult,
  ServerPoint,
  SpeedupFit,
  SpeedupRow,
} from './report-types.js';

/** "B=16 d=2ms i=1"; "—" for a plain HTTP server (http-json), whose settings bench cannot see. */
export function describeServer(server: ServerPoint | undefined): string {
  if (!server) return '—';
  return `B=${server.maxBatchSize} d=${formatDelay(server.maxQueueDelayUs)} i=${server.instances}`;
}

export function describeLoad(load: LoadLevel): string {
  return load.kind === 'concurrency' ? `c=${load.concurrency}` : `${round(load.rate, 2)}/s ${load.arrival}`;
}

export function describePoint(point: PointResult): string {
  const load = describeLoad(point.load);
  return point.server ? `${describeServer(point.server)}, ${load}` : load;
}

/** "503×3, connection×1", most frequent first; "—" when there were none. */
export function formatErrors(errors: Readonly<Record<string, number>>): string {
  const kinds = Object.entries(errors)
    .filter(([, count]) => count > 0)
    .sort(([a, x], [b, y]) => y - x || a.localeCompare(b));
  return kinds.length === 0 ? '—' : kinds.map(([kind, count]) => `${kind}×${count}`).join(', ');
}

/** At most `digits` decimals, without trailing zeros: 62.1, not 62.10. */
export function round(value: number, digits: number): string {
  return String(Number(value.toFixed(digits)));
}

export const POINT_COLUMNS = [
  'config',
  'load',
  'req/s',
  'items/s',
  'p50 ms',
  'p90 ms',
  'p99 ms',
  'p99.9 ms',
  'errors',
  'avg batch',
  'queue ms',
  'compute ms',
  'stable',
] as const;

/** Labels read from the left, figures line up on the right. */
export const POINT_ALIGN: readonly Table.HorizontalAlignment[] = [
  'left',
  'left',
  ...Array<Table.HorizontalAlignment>(6).fill('right'),
  'left',
  ...Array<Table.HorizontalAlignment>(3).fill('right'),
  'center',
];

/**
 * The points' table: POINT_COLUMNS, with the GPU's utilisation beside the throughput and the
 * response cache's hit ratio before `stable` when some point has them (a local GPU, a cached
 * model), so a CPU run's table is unchanged.
 */
export function pointTable(points: readonly PointResult[]): {
  columns: string[];
  align: Table.HorizontalAlignment[];
  rows: string[][];
} {
  const gpu = points.some((point) => (point.gpus?.length ?? 0) > 0);
  const cache = points.some((point) => point.serverSide?.cacheHitRatio !== undefined);
  const afterItems = POINT_COLUMNS.indexOf('items/s') + 1;
  const beforeStable = POINT_COLUMNS.indexOf('stable');
  const splice = <T>(row: readonly T[], gpuCell: T, cacheCell: T): T[] => [
    ...row.slice(0, afterItems),
    ...(gpu ? [gpuCell] : []),
    ...row.slice(afterItems, beforeStable),
    ...(cache ? [cacheCell] : []),
    ...row.slice(beforeStable),
  ];
  return {
    columns: splice<string>(POINT_COLUMNS, 'GPU util', 'cache hits'),
    align: splice<Table.HorizontalAlignment>(POINT_ALIGN, 'right', 'right'),
    rows: points.map((point) =>
      splice(pointCells(point), formatGpuUse(point.gpus), formatRatio(point.serverSide?.cacheHitRatio)),
    ),
  };
}

/** The busiest GPU's mean utilisation ("87%"), naming it when there are several ("87% gpu 1"). */
export function formatGpuUse(gpus: readonly GpuUse[] | undefined): string {
  const busiest = busiestGpu(gpus);
  if (busiest?.utilization === undefined) return '—';
  const percent = `${Math.round(busiest.utilization * 100)}%`;
  return (gpus?.length ?? 0) > 1 ? `${percent} gpu ${busiest.gpu}` : percent;
}

export function busiestGpu(gpus: readonly GpuUse[] | undefined): GpuUse | undefined {
  return gpus?.reduce<GpuUse | undefined>(
    (best, gpu) => ((gpu.utilization ?? -1) > (best?.utilization ?? -1) ? gpu : best),
    undefined,
  );
}

function formatRatio(ratio: number | undefined): string {
  return ratio === undefined ? '—' : `${(ratio * 100).toFixed(1)}%`;
}

export function pointCells(point: PointResult): string[] {
  const { latency, serverSide } = point;
  const ms = (value: number): string => value.toFixed(2);
  return [
    describeServer(point.server),
    describeLoad(point.load),
    point.throughput.toFixed(1),
    point.itemsPerSecond.toFixed(1),
    ms(latency.p50),
    ms(latency.p90),
    ms(latency.p99),
    ms(latency.p999),
    formatErrors(point.errors),
    serverSide ? serverSide.averageBatch.toFixed(2) : '—',
    serverSide ? ms(serverSide.queueMsPerRequest) : '—',
    serverSide ? ms(serverSide.computeMsPerRequest) : '—',
    point.stable ? '✓' : point.variation ? `✗ ${instabilityReason(point.variation)}` : '✗',
  ];
}

export const SPEEDUP_COLUMNS = ['B', 'predicted', 'achievable bound', 'measured'] as const;
export const SPEEDUP_ALIGN: readonly Table.HorizontalAlignment[] = ['right', 'right', 'right', 'right'];

export function speedupCells(row: SpeedupRow): string[] {
  const times = (value: number | undefined): string => (value === undefined ? '—' : `${value.toFixed(2)}×`);
  return [String(row.batchSize), times(row.predicted), times(row.achievableBound), times(row.measured)];
}

export function formatCeiling(ceiling: number): string {
  return `${ceiling.toFixed(2)}×`;
}

/** The names the reports give the two fits, so a chart or table says which one it shows. */
export const FIT_LABELS: Readonly<Record<SpeedupFit, string>> = { fit: 'server fit', inProcess: 'in-process fit' };

/** What stands where the ceiling would: 1 + c/m, or why a failed fit has none. */
export function describeCeiling(fit: BatchCostFit): string {
  return fit.ceiling === undefined
    ? `fit failed: ${fit.failure ?? 'no ceiling'}`
    : `ceiling 1 + c/m = ${formatCeiling(fit.ceiling)}`;
}

function describeFit(fit: BatchCostFit): string {
  const ms = (value: number): string => `${Number(value.toPrecision(3))} ms`;
  return `T(B) = c + m·B: c = ${ms(fit.c)}, m = ${ms(fit.m)}, R² = ${fit.r2.toFixed(3)}, ${describeCeiling(fit)}`;
}

const FAILURES: Readonly<Record<FitFailure, string>> = {
  'c < 0': 'a forward pass cannot cost less than nothing',
  'm ≤ 0': 'the time per pass does not grow with batch size',
};

function fitNote(fit: BatchCostFit, source: string): string | undefined {
  if (fit.failure !== undefined) {
    return `fit failed (${source}): ${fit.failure}, ${FAILURES[fit.failure]}; it gives no ceiling and no predicted speedup`;
  }
  if (!fit.poorFit) return undefined;
  return `poor fit (${source}): R² ${fit.r2.toFixed(3)} < 0.9, the straight line explains the timings poorly`;
}

/** Why the report has no server fit. */
export function noFitReason(report: BenchReport): string {
  return report.target.protocol === 'http-json'
    ? 'a plain HTTP server (--protocol http-json) reports no batch statistics, so T(B) cannot be fitted'
    : 'the server reported fewer than two batch sizes';
}

/** Which fit the speedup table's predictions come from, for the line above it. */
export function speedupCaption(report: BenchReport): string {
  const source = report.speedupFit;
  const fit = source && report[source];
  if (!source || !fit) return 'S(B): measured only, no fit';
  if (fit.failure !== undefined) return `S(B): measured only, the ${FIT_LABELS[source]} failed (${fit.failure})`;
  return `S(B) predicted by the ${FIT_LABELS[source]}`;
}

/** The c/m lines every format shows under the results. */
export function fitSummary(report: BenchReport): string[] {
  const lines: string[] = [];
  if (report.fit) lines.push(`server: ${describeFit(report.fit)}`);
  else lines.push(`server: no fit, ${noFitReason(report)}`);
  if (report.inProcess) lines.push(`in-process: ${describeFit(report.inProcess)}`);
  const notes = [
    report.fit && fitNote(report.fit, 'server'),
    report.inProcess && fitNote(report.inProcess, 'in-process'),
  ];
  return [...lines, ...notes.filter((note): note is string => note !== undefined)];
}

export function describeRecommendation(report: BenchReport): string | undefined {
  const rec = report.recommendation;
  if (!rec) return undefined;
  const { point } = rec;
  const advice = point.stable ? '' : '; no stable point met the budget: rerun with a longer --duration';
  return (
    `recommended for p99 ≤ ${round(rec.sloP99Ms, 2)} ms: ${describePoint(point)} ` +
    `(${point.throughput.toFixed(1)} req/s, p99 ${point.latency.p99.toFixed(2)} ms; ${stabilityLabel(point)}${advice})`
  );
}

/**
 * Whether a point's windows agreed, and by how much they strayed: "stable: windows within
 * ±3.1 %", "UNSTABLE: p99 varied ±31.4 %, throughput ±4.2 % between windows"; without the
 * windows' figures (a report from before they were kept), "stable" or "UNSTABLE".
 */
export function stabilityLabel(point: PointResult): string {
  const variation = point.variation;
  if (point.stable) {
    return variation
      ? `stable: windows within ±${round(Math.max(variation.throughputPct, variation.p99Pct), 1)} %`
      : 'stable';
  }
  return variation
    ? `UNSTABLE: p99 varied ±${round(variation.p99Pct, 1)} %, throughput ±${round(variation.throughputPct, 1)} % between windows`
    : 'UNSTABLE';
}

/** `--plan`'s answer: a heading and its lines, the same in every format. */
export function describePlan(plan: CapacityPlan): { heading: string; lines: string[] } {
  const { point, replicaRate: rate } = plan;
  const rates = (value: number): string => `${round(value, 2)} req/s`;
  const searches = plan.searches.map(({ server, sustainedRate, probes }) => {
    const tried = probes.map((probe) => `${round(probe.rate, 2)}${probe.sustained ? '✓' : '✗'}`).join(' ');
    const found = sustainedRate === null ? 'sustained no rate' : `sustained ${rates(sustainedRate)}`;
    return `${describeServer(server)} ${found}${tried === '' ? '' : ` (probes: ${tried})`}`;
  });
  return {
    heading: `capacity plan for ${rates(plan.targetRate)} at p99 ≤ ${round(plan.sloP99Ms, 2)} ms`,
    lines: [
      `one replica sustains ${rates(rate)} at ${describeServer(point.server)} ` +
        `(served ${point.throughput.toFixed(1)} req/s, p99 ${point.latency.p99.toFixed(2)} ms)`,
      `replicas: ceil(${round(plan.targetRate, 2)} / ${round(rate, 2)}) = ${plan.replicas}`,
      `autoscaler: --target-queue-depth ${plan.targetQueueDepth} (the KEDA threshold on sum(batchserve_pending_rows)); ` +
        `one replica holds ${plan.pendingRows.toFixed(1)} rows queued or running at ${rates(rate)}`,
      ...searches.map((search) => `rate search: ${search}`),
    ],
  };
}

export function describeTarget(report: BenchReport): string {
  const { target, environment: env } = report;
  const where = target.url ?? target.archive;
  // An http-json run without --model is named by its URL alone.
  const at = where === undefined || where === target.model ? '' : ` at ${where}`;
  return (
    `${target.model}${at} (${target.protocol}), ${report.createdAt}; ` +
    `batchserve ${env.batchserve}, Node ${env.node}, onnxruntime ${env.onnxruntime}, ` +
    `${env.cpus} × ${env.cpuModel}, ${env.platform}`
  );
}

/** One line per row: a rule between every point would double the table's height. */
function layout(table: Table.Table, aligns: readonly Table.HorizontalAlignment[]): Table.Table {
  table.options.colAligns = [...aligns];
  table.options.style.compact = true;
  return table;
}

/** For the terminal: plain text when piped (see createTable). */
export function renderTable(report: BenchReport): string {
  const points = pointTable(report.points);
  const results = layout(createTable(points.columns), points.align);
  for (const row of points.rows) results.push(row);
  const sections = [describeTarget(report), results.toString(), fitSummary(report).join('\n')];
  if (report.speedup.length > 0) {
    const speedup = layout(createTable([...SPEEDUP_COLUMNS]), SPEEDUP_ALIGN);
    for (const row of report.speedup) speedup.push(speedupCells(row));
    sections.push(`${speedupCaption(report)}:\n${speedup.toString()}`);
  }
  const recommendation = describeRecommendation(report);
  if (recommendation !== undefined && report.recommendation) {
    sections.push(`${recommendation}:\n${indent(report.recommendation.snippet)}`);
  }
  if (report.plan) {
    const { heading, lines } = describePlan(report.plan);
    sections.push(`${heading}:\n${indent(lines.join('\n'))}`);
  }
  if (report.warnings.length > 0) sections.push(report.warnings.map((w) => `warning: ${w}`).join('\n'));
  return `${sections.join('\n\n')}\n`;
}

function indent(text: string): string {
  return text
    .trimEnd()
    .split('\n')
    .map((line) => `  ${line}`)
    .join('\n');
}

function markdownPointTable(points: readonly PointResult[]): string {
  const { columns, rows, align } = pointTable(points);
  return markdownTable(columns, rows, align);
}

export function renderMarkdown(report: BenchReport): string {
  const sections = [
    `# Bench: ${markdownText(report.target.model)}`,
    markdownText(describeTarget(report)),
    markdownPointTable(report.points),
    fitSummary(report)
      .map((line) => `- ${markdownText(line)}`)
      .join('\n'),
  ];
  if (report.speedup.length > 0) {
    sections.push(
      `${markdownText(speedupCaption(report))}:\n\n${markdownTable(SPEEDUP_COLUMNS, report.speedup.map(speedupCells), SPEEDUP_ALIGN)}`,
    );
  }
  const recommendation = describeRecommendation(report);
  if (recommendation !== undefined && report.recommendation) {
    sections.push(`${markdownText(recommendation)}:\n\n\`\`\`yaml\n${report.recommendation.snippet}\`\`\``);
  }
  if (report.plan) {
    const { heading, lines } = describePlan(report.plan);
    sections.push([`**${markdownText(heading)}**`, '', ...lines.map((line) => `- ${markdownText(line)}`)].join('\n'));
  }
  if (report.warnings.length > 0) {
    sections.push(['**Warnings**', '', ...report.warnings.map((w) => `- ${markdownText(w)}`)].join('\n'));
  }
  return `${sections.join('\n\n')}\n`;
}

function markdownTable(
  head: readonly string[],
  rows: readonly string[][],
  aligns: readonly Table.HorizontalAlignment[],
): string {
  const line = (cells: readonly string[]): string => `| ${cells.map(markdownCell).join(' | ')} |`;
  const rules = { left: '---', center: ':---:', right: '---:' };
  const rule = head.map((_, i) => rules[aligns[i] ?? 'left']);
  return [line(head), line(rule), ...rows.map(line)].join('\n');
}

function markdownCell(text: string): string {
  return markdownText(text).replaceAll('|', '\\|').replace(/\r?\n/g, ' ');
}

/** User-supplied text (model names, URLs) must not turn into markup. */
function markdownText(text: string): string {
  return text.replace(/[\\`*_[\]<>#]/g, '\\$&');
}

/**
 * One row per point with every figure, unrounded; one `errors_<kind>` column per error kind
 * seen anywhere in the run. RFC 4180: CRLF line ends, quotes only where needed.
 */
export function renderCsv(report: BenchReport): string {
  const errorKinds = [...new Set(report.points.flatMap((p) => Object.keys(p.errors)))].sort();
  const head = [
    'max_batch_size',
    'max_queue_delay_us',
    'instances',
    'load_kind',
    'concurrency',
    'rate',
    'arrival',
    'client_batch',
    'duration_s',
    'requests',
    'throughput',
    'items_per_second',
    'latency_count',
    'latency_mean_ms',
    'p50_ms',
    'p90_ms',
    'p99_ms',
    'p999_ms',
    'max_ms',
    'error_count',
    ...errorKinds.map((kind) => `errors_${kind}`),
    'stable',
    'windows',
    'throughput_variation_pct',
    'p99_variation_pct',
    'server_requests',
    'server_inferences',
    'server_executions',
    'server_average_batch',
    'server_queue_ms',
    'server_compute_ms',
    'server_version',
    'server_cache_hit_ratio',
    'gpu_utilization',
    'gpu_memory_used_bytes',
  ];
  const rows = report.points.map((p) => {
    const { load, latency: l, serverSide: s } = p;
    return [
      p.server?.maxBatchSize,
      p.server?.maxQueueDelayUs,
      p.server?.instances,
      load.kind,
      load.kind === 'concurrency' ? load.concurrency : undefined,
      load.kind === 'rate' ? load.rate : undefined,
      load.kind === 'rate' ? load.arrival : undefined,
      p.clientBatch,
      p.durationSeconds,
      p.requests,
      p.throughput,
      p.itemsPerSecond,
      l.count,
      l.mean,
      l.p50,
      l.p90,
      l.p99,
      l.p999,
      l.max,
      p.errorCount,
      ...errorKinds.map((kind) => p.errors[kind] ?? 0),
      p.stable,
      p.windows,
      p.variation?.throughputPct,
      p.variation?.p99Pct,
      s?.requests,
      s?.inferences,
      s?.executions,
      s?.averageBatch,
      s?.queueMsPerRequest,
      s?.computeMsPerRequest,
      s?.version,
      s?.cacheHitRatio,
      busiestGpu(p.gpus)?.utilization,
      busiestGpu(p.gpus)?.memoryUsedBytes,
    ];
  });
  return [head, ...rows].map((row) => `${row.map(csvField).join(',')}\r\n`).join('');
}

function csvField(value: string | number | boolean | undefined): string {
  if (value === undefined) return '';
  const text = String(value);
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}
