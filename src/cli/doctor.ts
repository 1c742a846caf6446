import { examineMachine, type DoctorReport } from '../runtime/doctor.js';
import type { GpuReading } from '../runtime/nvidia-smi.js';
import { ModelLoadError } from '../core/errors.js';
import { createTable } from '../core/table.js';

/** Where the width of the terminal is unknown (a pipe, a log): wide enough for most reasons in a few lines. */
const DEFAULT_WIDTH = 100;
/** The narrowest "why not" column worth wrapping into; below it the table simply runs wider. */
const MIN_REASON_WIDTH = 16;

/** Prints what this machine can run; fails only when not even the CPU provider works. */
export async function runDoctor(options: { json: boolean }): Promise<void> {
  const report = await examineMachine();
  if (options.json) {
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } else {
    process.stdout.write(
      formatDoctorReport(report, process.stdout.columns || Number(process.env.COLUMNS) || DEFAULT_WIDTH),
    );
  }
  if (!report.providers.some((provider) => provider.name === 'cpu' && provider.works)) {
    throw new ModelLoadError('the CPU execution provider does not work: onnxruntime-node is not installed correctly');
  }
}

/** The report as text no wider than `width` columns: the "why not" column wraps to fit. */
export function formatDoctorReport(report: DoctorReport, width: number): string {
  const lines = [
    `batchserve ${report.batchserve}, node ${report.node}, onnxruntime-node ${report.onnxruntime}, ${report.platform}`,
    `cpu: ${report.cpu.cores} cores, ${report.cpu.model}`,
    `vulkan adapters (vulkaninfo): ${report.vulkanAdapters ? report.vulkanAdapters.join('; ') || 'none' : 'vulkaninfo not found'}`,
  ];
  const rows = report.providers.map((provider) => [
    provider.name,
    provider.device,
    provider.bundled ? 'yes' : 'no',
    provider.works ? 'yes' : 'no',
    provider.error ?? '',
  ]);
  const head = ['provider', 'device', 'bundled', 'works', 'why not'];
  // Each column's widest cell plus its padding; the last takes what the terminal has left
  // after them and the borders (one per column, plus one).
  const fixed = head
    .slice(0, -1)
    .map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]?.length ?? 0)) + 2);
  const longest = Math.max(head.at(-1)?.length ?? 0, ...rows.map((row) => row.at(-1)?.length ?? 0)) + 2;
  const left = width - fixed.reduce((sum, column) => sum + column, 0) - head.length - 1;
  const reasonWidth = Math.min(longest, Math.max(MIN_REASON_WIDTH, left));
  const table = createTable(head, { colWidths: [...fixed, reasonWidth] });
  table.push(...rows.map((row) => [...row.slice(0, -1), wrap(row.at(-1) ?? '', reasonWidth - 2)]));
  const gpus = gpuTable(report.gpus);
  const text = [...lines, gpus === undefined ? gpuLine(report.gpus) : 'gpus (nvidia-smi):'].map((line) =>
    wrap(line, width),
  );
  return `${[...text, ...(gpus ? [gpus] : []), table.toString()].join('\n')}\n`;
}

/** Why nvidia-smi shows no GPU. */
function gpuLine(reading: GpuReading): string {
  return `gpus (nvidia-smi): ${reading.kind === 'gpus' ? 'none' : reading.error}`;
}

/** nvidia-smi's figures, one row per GPU; undefined when it shows none. */
function gpuTable(reading: GpuReading): string | undefined {
  if (reading.kind !== 'gpus' || reading.gpus.length === 0) return undefined;
  const table = createTable(['gpu', 'name', 'utilisation', 'memory used / total', 'power']);
  for (const gpu of reading.gpus) {
    table.push([
      String(gpu.index),
      gpu.name,
      gpu.utilization === undefined ? 'n/a' : `${Math.round(gpu.utilization * 100)} %`,
      `${mib(gpu.memoryUsedBytes)} / ${mib(gpu.memoryTotalBytes)}`,
      gpu.powerWatts === undefined ? 'n/a' : `${gpu.powerWatts.toFixed(0)} W`,
    ]);
  }
  return table.toString();
}

/**
 * Lines of at most `width` characters, broken between words, and inside a word (a long file
 * path in a native warning) only when it alone is wider: cli-table3 would cut it off.
 */
export function wrap(text: string, width: number): string {
  const lines: string[] = [];
  let line = '';
  for (let word of text.split(/\s+/).filter(Boolean)) {
    while (word.length > width) {
      if (line) lines.push(line);
      lines.push(word.slice(0, width));
      word = word.slice(width);
      line = '';
    }
    if (!line) line = word;
    else if (line.length + 1 + word.length <= width) line += ` ${word}`;
    else {
      lines.push(line);
      line = word;
    }
  }
  if (line) lines.push(line);
  return lines.join('\n');
}

function mib(bytes: number | undefined): string {
  return bytes === undefined ? 'n/a' : `${Math.round(bytes / 2 ** 20)} MiB`;
}
