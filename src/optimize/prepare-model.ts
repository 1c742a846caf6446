import { readFile } from 'node:fs/promises';
import { basename, extname } from 'node:path';
import type { AccuracyFigures, ModelPrecision } from '../archive/manifest.js';
import { extraFileSource, type PreparedModelFiles } from '../archive/pack.js';
import { readModelConfigFile } from '../config/load.js';
import { validateModelConfig, type ModelConfig } from '../config/model-config.js';
import { HandlerInvalidError, InputFileError, UsageError } from '../core/errors.js';
import type { TensorSpec } from '../core/tensors.js';
import { decoderLayout, isPresent, takesCache, type DecoderLayout } from '../runtime/decoder-layout.js';
import { readGraphSignature, type GraphSignature } from '../runtime/session.js';
import { accuracyGateError, DEFAULT_GATE_LIMITS, gateFailures, measureAccuracy } from './accuracy-gate.js';
import { calibrationGateFeeds, randomGateFeeds, type GateFeeds } from './calibration-inputs.js';
import { decoderGateFeeds } from './decoder-gate-inputs.js';
import { gateTokenIds } from './gate-token-ids.js';
import type { Converter } from './converters.js';
import { measureStartupMs, optimizeGraph } from './optimize-graph.js';

export interface PrepareModelOptions {
  readonly serializedFile: string;
  readonly configFile?: string;
  /** The pack's handler; `image-classifier` lets calibration images through its preprocessing. */
  readonly handler?: string;
  /** --extra-files: where the gate finds the tokenizer the config names. */
  readonly extraFiles?: readonly string[];
  readonly precision?: ModelPrecision;
  /** Keep float32 inputs and outputs (Casts at the edges); default true. */
  readonly keepIoTypes?: boolean;
  readonly fp32Ops?: readonly string[];
  readonly calibrationData?: string;
  /** Overrides the precision's default max relative error. */
  readonly maxError?: number;
  /** Overrides the precision's default top-1 agreement. */
  readonly minAgreement?: number;
  /**
   * Pack a model that fails the gate anyway (recorded as `passed: false`). Its own option, not
   * pack's `force`: a script that passes --force to replace last build's archive must not
   * thereby ship a converted model that lost accuracy.
   */
  readonly acceptAccuracyLoss?: boolean;
  readonly optimize?: boolean;
  /** The converters; tests pass ones that break a model on purpose. */
  readonly converter?: Converter;
}

export interface PreparedModel extends PreparedModelFiles {
  /** What the converter changed, one line. */
  readonly conversion?: string;
  /** Session creation of the served model without and with its optimised graph. */
  readonly startup?: { readonly originalMs: number; readonly optimizedMs: number };
  /** Limits the model crossed, when `acceptAccuracyLoss` packed it anyway. */
  readonly acceptedFailures?: readonly string[];
}

/**
 * The model work of `pack --precision` and `--optimize`, before anything is written: convert,
 * run the accuracy gate (refusing unless its loss is accepted), save the optimised graph and time start-up.
 * The given file always stays in the archive: the gate's reference, for `inspect` and for a
 * rollback that needs no re-export.
 */
export async function prepareModel(options: PrepareModelOptions): Promise<PreparedModel> {
  const stem = basename(options.serializedFile, extname(options.serializedFile));
  const original = await readFile(options.serializedFile).catch(() => {
    throw new InputFileError(`serialized file ${options.serializedFile} does not exist or is not readable`);
  });
  const userConfig = options.configFile
    ? await readModelConfigFile(options.configFile)
    : validateModelConfig({}, 'config');
  const files: { path: string; content: Buffer }[] = [];
  let served: Uint8Array = original;
  let servedFile: string | undefined;
  let conversion: string | undefined;
  let accuracy: AccuracyFigures | undefined;
  let acceptedFailures: string[] | undefined;

  if (options.precision) {
    // Loaded only when converting: --optimize alone needs no protobuf code.
    const convert = options.converter ?? (await (await import('./converters.js')).loadConverter(options.precision));
    const converted = convert(original, options.precision, {
      keepIoTypes: options.keepIoTypes ?? true,
      fp32Ops: options.fp32Ops ?? [],
    });
    conversion = converted.summary;
    accuracy = await runGate(options, options.precision, userConfig, original, converted.model);
    const failures = gateFailures(accuracy.outputs, accuracy.limits);
    if (failures.length > 0 && !options.acceptAccuracyLoss) throw accuracyGateError(options.precision, accuracy);
    if (failures.length > 0) acceptedFailures = failures;
    served = converted.model;
    servedFile = `${stem}.${options.precision}.onnx`;
    files.push({ path: servedFile, content: Buffer.from(served) });
  }

  let optimizedFile: string | undefined;
  let startup: PreparedModel['startup'];
  let optimization: PreparedModelFiles['manifest']['optimization'];
  if (options.optimize) {
    const optimized = await optimizeGraph(served, servedFile ?? basename(options.serializedFile));
    optimizedFile = `${basename(servedFile ?? options.serializedFile).replace(/\.onnx$/i, '')}.optimized.onnx`;
    optimization = optimized.optimization;
    files.push({ path: optimizedFile, content: optimized.bytes });
    startup = {
      originalMs: await measureStartupMs(served, userConfig.runtime),
      optimizedMs: await measureStartupMs(optimized.bytes, userConfig.runtime),
    };
  }

  return {
    ...(servedFile ? { servedFile } : {}),
    files,
    manifest: {
      ...(options.precision ? { precision: options.precision } : {}),
      ...(accuracy ? { accuracy } : {}),
      ...(optimizedFile ? { optimizedFile } : {}),
      ...(optimization ? { optimization } : {}),
    },
    ...(conversion ? { conversion } : {}),
    ...(startup ? { startup } : {}),
    ...(acceptedFailures ? { acceptedFailures } : {}),
  };
}

async function runGate(
  options: PrepareModelOptions,
  precision: ModelPrecision,
  config: ModelConfig,
  original: Uint8Array,
  converted: Uint8Array,
): Promise<AccuracyFigures> {
  const signature = await readGraphSignature(original, options.serializedFile);
  const inputs = gateInputs(signature, config);
  const batching =
    config.max_batch_size !== undefined
      ? config.max_batch_size > 0
      : [...signature.inputs, ...signature.outputs].every((spec) => spec.shape[0] === -1);
  const imageOptions =
    options.handler === 'image-classifier'
      ? (config.image_classifier ?? validateModelConfig({ image_classifier: {} }, 'defaults').image_classifier)
      : undefined;
  if (options.calibrationData && !batching) {
    throw new UsageError('--calibration-data needs a model that batches (max_batch_size > 0): its files hold rows');
  }
  const decoder = takesCache(inputs);
  let gateFeeds: GateFeeds;
  if (options.calibrationData) {
    gateFeeds = await calibrationGateFeeds(options.calibrationData, inputs, imageOptions);
  } else {
    const tokenIds = gateTokenIds(await packedTokenizer(options.extraFiles ?? [], config));
    gateFeeds = decoder
      ? decoderGateFeeds(gateDecoderLayout(inputs, signature.outputs, options.keepIoTypes ?? true), tokenIds)
      : randomGateFeeds(inputs, batching, tokenIds);
  }
  const defaults = DEFAULT_GATE_LIMITS[precision];
  return measureAccuracy({
    original,
    converted,
    runtime: config.runtime,
    gateFeeds,
    classifierOutputs: classifierOutputs(signature, options.handler),
    // A decoder is judged on its logits: its presents are the cache its next step reads.
    ...(decoder ? { outputs: signature.outputs.filter((output) => !isPresent(output)).map(({ name }) => name) } : {}),
    limits: {
      maxRelError: options.maxError ?? defaults.maxRelError,
      minTop1Agreement: options.minAgreement ?? defaults.minTop1Agreement,
    },
  });
}

/** The tokenizer.json the config's text.tokenizer_file names among --extra-files, when it is there. */
async function packedTokenizer(extraFiles: readonly string[], config: ModelConfig): Promise<string | undefined> {
  const file = config.text?.tokenizer_file;
  const path = file === undefined ? undefined : await extraFileSource(extraFiles, file);
  return path === undefined ? undefined : readFile(path, 'utf8');
}

/**
 * The decoder's layout, for feeding it as the text-generation handler does; a decoder it cannot
 * feed, or whose cache would become float16, is refused with the way round.
 */
function gateDecoderLayout(
  inputs: readonly TensorSpec[],
  outputs: readonly TensorSpec[],
  keepIoTypes: boolean,
): DecoderLayout {
  if (!keepIoTypes) {
    throw new UsageError(
      "--keep-io-types=false would make the decoder's cache (past_key_values, present) float16, which neither the accuracy gate nor the text-generation handler feeds; leave it on",
    );
  }
  try {
    return decoderLayout(inputs, outputs);
  } catch (error) {
    if (!(error instanceof HandlerInvalidError)) throw error;
    throw new UsageError(
      `the accuracy gate cannot make inputs for this decoder (${error.message}); pass --calibration-data DIR with inputs it takes`,
    );
  }
}

/** The original model's inputs in the shapes the config serves (it may fix a variable width). */
function gateInputs(signature: GraphSignature, config: ModelConfig): TensorSpec[] {
  return signature.inputs.map((input) => {
    const served = config.inputs?.find((spec) => spec.name === input.name);
    return served && served.shape.length === input.shape.length ? { ...input, shape: served.shape } : input;
  });
}

/**
 * Outputs whose arg-max is the answer: [batch, classes] float outputs, and the scores an
 * image-classifier handler ranks (its first output).
 */
function classifierOutputs(signature: GraphSignature, handler: string | undefined): Set<string> {
  const names = new Set<string>();
  signature.outputs.forEach((output, index) => {
    const float = output.datatype === 'FP32' || output.datatype === 'FP16' || output.datatype === 'FP64';
    const classes = output.shape[1] ?? 0;
    if (float && output.shape.length === 2 && (classes >= 2 || classes === -1)) names.add(output.name);
    if (float && index === 0 && handler === 'image-classifier') names.add(output.name);
  });
  return names;
}
