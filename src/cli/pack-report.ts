import type { AccuracyFigures, ArchiveManifest } from '../archive/manifest.js';
import { createTable } from '../core/table.js';
import type { PreparedModel } from '../optimize/prepare-model.js';

/** What `pack --precision` / `--optimize` did, printed before the archive is written. */
export function describePreparedModel(prepared: PreparedModel): string {
  const lines: string[] = [];
  const { precision, accuracy, optimization } = prepared.manifest;
  if (precision && prepared.conversion) lines.push(`${precision}: ${prepared.conversion}`);
  if (accuracy) lines.push(accuracyTable(accuracy));
  if (accuracy?.inputs === 'random') {
    lines.push(
      'the gate ran on seeded random inputs, which can pass a model that real ones fail: --calibration-data DIR judges it on what you serve',
    );
  }
  for (const failure of prepared.acceptedFailures ?? [])
    lines.push(`warning: packed anyway (--accept-accuracy-loss): ${failure}`);
  if (optimization && prepared.startup) {
    const { originalMs, optimizedMs } = prepared.startup;
    lines.push(
      `optimised graph (onnxruntime ${optimization.onnxruntimeVersion}, level ${optimization.level}): session start-up ${originalMs.toFixed(1)} ms → ${optimizedMs.toFixed(1)} ms (${(originalMs / optimizedMs).toFixed(2)}×)`,
    );
  }
  return `${lines.join('\n')}\n`;
}

/** The gate's figures per output, with the limits and the verdict. */
export function accuracyTable(figures: AccuracyFigures): string {
  const decoded = figures.outputs.some((output) => output.decodedAgreement !== undefined);
  const table = createTable([
    'output',
    'max abs error',
    'max rel error',
    'top-1 agreement',
    ...(decoded ? ['decoded agreement'] : []),
  ]);
  for (const output of figures.outputs) {
    table.push([
      output.name,
      formatError(output.maxAbsError),
      formatError(output.maxRelError),
      formatShare(output.top1Agreement),
      ...(decoded ? [formatShare(output.decodedAgreement)] : []),
    ]);
  }
  const verdict = figures.passed ? 'passed' : 'FAILED (packed with --accept-accuracy-loss)';
  return (
    `accuracy gate ${verdict}: ${figures.samples} ${figures.inputs} samples, limits max rel error ` +
    `${figures.limits.maxRelError}, top-1 agreement ${figures.limits.minTop1Agreement}\n${table.toString()}`
  );
}

function formatShare(value: number | undefined): string {
  return value === undefined ? '—' : `${(value * 100).toFixed(1)} %`;
}

function formatError(value: number | null): string {
  if (value === null) return 'NaN/Inf';
  return value === 0 ? '0' : value < 0.01 ? value.toExponential(2) : value.toPrecision(3);
}

/** `inspect`'s lines on precision and optimisation; empty for an archive packed as exported. */
export function modelVariantLines(model: ArchiveManifest['model']): string[] {
  const lines: string[] = [];
  if (model.precision) {
    lines.push(`precision  ${model.precision} (${model.serializedFile}, converted from ${model.originalFile ?? '?'})`);
  }
  if (model.optimizedFile && model.optimization) {
    lines.push(
      `optimised  ${model.optimizedFile}: level ${model.optimization.level}, onnxruntime ${model.optimization.onnxruntimeVersion} (served on cpu with that version)`,
    );
  }
  return lines;
}
