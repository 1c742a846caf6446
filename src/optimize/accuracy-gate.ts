import ort from 'onnxruntime-node';
import type { AccuracyFigures, ModelPrecision, OutputAccuracy } from '../archive/manifest.js';
import type { ModelConfig } from '../config/model-config.js';
import { AccuracyGateError, ModelConversionError, UsageError } from '../core/errors.js';
import type { TensorMap } from '../handlers/ort-tensors.js';
import { createSession } from '../runtime/session.js';
import type { GateFeeds } from './calibration-inputs.js';
import { float16Bits, float16Value } from './float16-bits.js';

export interface GateLimits {
  /** Largest max |converted − original| / max |original| allowed, per output. */
  readonly maxRelError: number;
  /** Smallest share of rows with the same arg-max class, per classifier output. */
  readonly minTop1Agreement: number;
}

/**
 * Defaults per precision, on the gate's inputs (seeded random ones unless --calibration-data).
 * FP16 keeps 11 significant bits, a rounding step of 2^-11 ≈ 0.05 % per operation; through a
 * few dozen layers that grows to 0.5–2 % of an output's range on random inputs (PP-OCRv4's
 * recogniser: 2 %; on real text lines 6.7 %, decoding all 50 the same), so 5 % passes honest
 * conversions and fails what breaks a model: overflow (Infinity, always a failure), weights
 * clamped to ±65504, a wrong Cast. One flip in 64 random rows is a near-tie, not a broken
 * model, so 98 % agreement.
 * INT8 weights carry 256 levels per channel and activations are quantised at run time: errors of
 * a few percent of the range are normal, so 15 % of the range is the limit and the classes
 * decide: 95 % top-1 agreement.
 */
export const DEFAULT_GATE_LIMITS: Readonly<Record<ModelPrecision, GateLimits>> = {
  fp16: { maxRelError: 0.05, minTop1Agreement: 0.98 },
  int8: { maxRelError: 0.15, minTop1Agreement: 0.95 },
};

interface OutputTally {
  maxAbs: number;
  maxReference: number;
  finite: boolean;
  agreeing: number;
  rows: number;
  /** Until a pass shows otherwise: the output is [batch, steps, classes] of per-step probabilities. */
  sequence: boolean;
  decodedAgreeing: number;
  decodedRows: number;
}

/**
 * Runs the original and the converted model on the same feeds (float inputs become float16
 * for a converted model that takes float16) and measures, per output, the max absolute and
 * relative error; for `classifierOutputs`, the top-1 agreement; and for a sequence of class
 * choices (any other [batch, steps, classes] output whose every step the original answers with
 * a probability distribution, as a CTC text recogniser does), the decoded agreement.
 */
export async function measureAccuracy(options: {
  readonly original: Uint8Array;
  readonly converted: Uint8Array;
  readonly runtime: ModelConfig['runtime'];
  readonly gateFeeds: GateFeeds;
  readonly classifierOutputs: ReadonlySet<string>;
  /** The outputs compared; default every one. A decoder's presents are its next step's cache, not an answer. */
  readonly outputs?: readonly string[];
  readonly limits: GateLimits;
}): Promise<AccuracyFigures> {
  const { runtime } = options;
  const original = await createSession(options.original, { runtime }, 'the original model');
  const converted = await createSession(options.converted, { runtime }, 'the converted model').catch(
    async (error: unknown) => {
      await original.release();
      throw error;
    },
  );
  try {
    const halfInputs = new Set(
      converted.inputMetadata.filter((input) => input.isTensor && input.type === 'float16').map((input) => input.name),
    );
    const tallies = new Map<string, OutputTally>();
    const { source } = options.gateFeeds;
    let expected: ort.InferenceSession.ReturnType = {};
    let actual: ort.InferenceSession.ReturnType = {};
    for (const feed of options.gateFeeds.feeds) {
      expected = await original.run(typeof feed === 'function' ? feed(expected) : feed).catch((error: unknown) => {
        throw new UsageError(
          source === 'random'
            ? `the accuracy gate's random inputs make the original model fail (${firstLine(error)}); pass --calibration-data DIR with inputs it takes`
            : `the original model fails on the --calibration-data inputs (${firstLine(error)})`,
        );
      });
      const converting = typeof feed === 'function' ? feed(actual) : feed;
      actual = await converted.run(asConvertedInputs(converting, halfInputs)).catch((error: unknown) => {
        throw new ModelConversionError(`the converted model fails on inputs the original runs: ${firstLine(error)}`);
      });
      for (const name of options.outputs ?? original.outputNames) {
        const tally = tallies.get(name) ?? {
          maxAbs: 0,
          maxReference: 0,
          finite: true,
          agreeing: 0,
          rows: 0,
          sequence: true,
          decodedAgreeing: 0,
          decodedRows: 0,
        };
        tallies.set(name, tally);
        compareOutput(
          expected[name] as ort.Tensor,
          actual[name] as ort.Tensor,
          tally,
          options.classifierOutputs.has(name),
        );
      }
    }
    const outputs = [...tallies].map(([name, tally]) => figuresOf(name, tally, options.classifierOutputs.has(name)));
    return {
      inputs: options.gateFeeds.source,
      samples: options.gateFeeds.samples,
      limits: options.limits,
      outputs,
      passed: gateFailures(outputs, options.limits).length === 0,
    };
  } finally {
    await Promise.all([original.release(), converted.release()]);
  }
}

function asConvertedInputs(feed: TensorMap, halfInputs: ReadonlySet<string>): TensorMap {
  if (halfInputs.size === 0) return feed;
  const converted: TensorMap = {};
  for (const [name, tensor] of Object.entries(feed)) {
    converted[name] =
      halfInputs.has(name) && tensor.type === 'float32'
        ? new ort.Tensor('float16', Uint16Array.from(tensor.data as Float32Array, float16Bits), tensor.dims)
        : tensor;
  }
  return converted;
}

/** onnxruntime's message, first line: its source-location detail follows on the next. */
function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0] ?? '';
}

function numbersOf(tensor: ort.Tensor): ArrayLike<number> {
  if (tensor.type === 'float16') return Float32Array.from(tensor.data as Uint16Array, float16Value);
  const data = tensor.data;
  if (data instanceof BigInt64Array || data instanceof BigUint64Array) return Float64Array.from(data, Number);
  return data as ArrayLike<number>;
}

function compareOutput(expected: ort.Tensor, actual: ort.Tensor, tally: OutputTally, classifier: boolean): void {
  const reference = numbersOf(expected);
  const values = numbersOf(actual);
  if (reference.length !== values.length) {
    tally.finite = false;
    return;
  }
  for (let i = 0; i < reference.length; i++) {
    const want = reference[i] as number;
    const got = values[i] as number;
    if (!Number.isFinite(got) && Number.isFinite(want)) tally.finite = false;
    const error = Math.abs(got - want);
    if (error > tally.maxAbs) tally.maxAbs = error;
    if (Math.abs(want) > tally.maxReference) tally.maxReference = Math.abs(want);
  }
  const classes = expected.dims[expected.dims.length - 1] ?? 1;
  if (classifier) {
    for (let row = 0; row * classes < reference.length; row++) {
      tally.rows += 1;
      if (argMax(reference, row * classes, classes) === argMax(values, row * classes, classes)) tally.agreeing += 1;
    }
    return;
  }
  tally.sequence &&= expected.dims.length === 3 && classes >= 2 && everyStepADistribution(reference, classes);
  if (!tally.sequence) return;
  const rowLength = classes * (expected.dims[1] ?? 0);
  for (let start = 0; start < reference.length; start += rowLength) {
    tally.decodedRows += 1;
    if (sameDecoding(reference, values, start, start + rowLength, classes)) tally.decodedAgreeing += 1;
  }
}

/** Probabilities at every step: values in [0, 1] summing to 1 (within float16's rounding). */
function everyStepADistribution(values: ArrayLike<number>, classes: number): boolean {
  for (let start = 0; start < values.length; start += classes) {
    let sum = 0;
    for (let i = start; i < start + classes; i++) {
      const value = values[i] as number;
      if (!(value >= -1e-6 && value <= 1 + 1e-6)) return false;
      sum += value;
    }
    if (Math.abs(sum - 1) > 0.01) return false;
  }
  return true;
}

/**
 * Whether one row of steps decodes to the same labels in both: greedy CTC decoding, the arg-max
 * class at each step, repeats collapsed and class 0 (the blank, in PaddleOCR's and torchaudio's
 * convention) dropped. A changed step that decoding absorbs (a blank or a repeat) agrees.
 */
function sameDecoding(
  reference: ArrayLike<number>,
  values: ArrayLike<number>,
  start: number,
  end: number,
  classes: number,
): boolean {
  let i = start;
  let j = start;
  let previousReference = -1;
  let previousValue = -1;
  for (;;) {
    let wanted = -1;
    while (wanted === -1 && i < end) {
      const label = argMax(reference, i, classes);
      if (label !== previousReference && label !== 0) wanted = label;
      previousReference = label;
      i += classes;
    }
    let got = -1;
    while (got === -1 && j < end) {
      const label = argMax(values, j, classes);
      if (label !== previousValue && label !== 0) got = label;
      previousValue = label;
      j += classes;
    }
    if (wanted !== got) return false;
    if (wanted === -1) return true;
  }
}

function argMax(values: ArrayLike<number>, start: number, count: number): number {
  let best = 0;
  for (let i = 1; i < count; i++) if ((values[start + i] as number) > (values[start + best] as number)) best = i;
  return best;
}

function figuresOf(name: string, tally: OutputTally, classifier: boolean): OutputAccuracy {
  const finite = tally.finite && Number.isFinite(tally.maxAbs);
  const relative = tally.maxReference > 0 ? tally.maxAbs / tally.maxReference : tally.maxAbs === 0 ? 0 : Infinity;
  return {
    name,
    maxAbsError: finite ? tally.maxAbs : null,
    maxRelError: finite && Number.isFinite(relative) ? relative : null,
    ...(classifier ? { top1Agreement: tally.rows > 0 ? tally.agreeing / tally.rows : 0 } : {}),
    ...(!classifier && tally.sequence && tally.decodedRows > 0
      ? { decodedAgreement: tally.decodedAgreeing / tally.decodedRows }
      : {}),
  };
}

/**
 * One phrase per limit an output crosses; empty when the conversion passes. A decoded sequence
 * is judged by its labels alone: its per-step probabilities are not the answer, and an fp16
 * recogniser that reads every real text line the same drifts by 6.7 % of their range.
 */
export function gateFailures(outputs: readonly OutputAccuracy[], limits: GateLimits): string[] {
  const failures: string[] = [];
  for (const output of outputs) {
    if (output.maxRelError === null) {
      failures.push(`output "${output.name}" has NaN or Infinity where the original's is finite`);
      continue;
    }
    if (output.decodedAgreement === undefined && output.maxRelError > limits.maxRelError) {
      failures.push(
        `output "${output.name}" max relative error ${output.maxRelError.toPrecision(3)} > ${limits.maxRelError} (--max-error)`,
      );
    }
    if (output.top1Agreement !== undefined && output.top1Agreement < limits.minTop1Agreement) {
      failures.push(
        `output "${output.name}" top-1 agreement ${output.top1Agreement.toFixed(3)} < ${limits.minTop1Agreement} (--min-agreement)`,
      );
    }
    if (output.decodedAgreement !== undefined && output.decodedAgreement < limits.minTop1Agreement) {
      failures.push(
        `output "${output.name}" decoded agreement ${output.decodedAgreement.toFixed(3)} < ${limits.minTop1Agreement} (--min-agreement)`,
      );
    }
  }
  return failures;
}

/** The refusal pack raises when the gate fails without --accept-accuracy-loss. */
export function accuracyGateError(precision: ModelPrecision, figures: AccuracyFigures): AccuracyGateError {
  const failures = gateFailures(figures.outputs, figures.limits);
  return new AccuracyGateError(
    `accuracy gate: the ${precision} model differs from the original on ${figures.samples} ${figures.inputs} samples: ${failures.join('; ')}; nothing written (pass --accept-accuracy-loss to pack it anyway)`,
  );
}
