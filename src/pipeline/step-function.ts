import { extname } from 'node:path';
import { stat } from 'node:fs/promises';
import ort from 'onnxruntime-node';
import { HandlerInvalidError, HandlerLoadTimeoutError } from '../core/errors.js';
import { pathInside } from '../core/entry-name.js';
import { functionReference, isModelStep, type PipelineConfig } from '../config/pipeline-config.js';
import { checkHandlerImport } from '../handlers/handler-probe.js';
import { HANDLER_EXTENSIONS, importHandlerModule } from '../handlers/load.js';

/**
 * One pipeline request's tensors as a step sees them, under the step's own names.
 * BYTES tensors are onnxruntime string tensors. A pipeline *input* of datatype BYTES holds
 * byte strings: each element is a JS string with one character per byte (latin1), so
 * `Buffer.from(element, 'latin1')` gives back exactly the bytes sent (v2 binary, v2 JSON
 * text as its UTF-8 bytes, gRPC, or the whole body of `/predictions/{pipeline}`, which becomes
 * the first input as one element of shape [1]). A step's BYTES *outputs* are JS strings, and a
 * pipeline output of BYTES goes to the client as UTF-8 text (a JSON string per element is fine).
 */
export type PipelineTensors = Readonly<Record<string, ort.Tensor>>;

export interface StepContext {
  readonly pipeline: string;
  readonly step: string;
  readonly version: string;
  /** The extracted archive's folder, to read data files packed with --extra-files. */
  readonly dir: string;
  /**
   * The server's onnxruntime Tensor class: build outputs with it (`new context.Tensor(...)`).
   * A step file runs from the extracted archive, where `onnxruntime-node` cannot be imported,
   * and only tensors of this class are taken as tensors.
   */
  readonly Tensor: typeof ort.Tensor;
}

/**
 * Called with one entry per pipeline request in the batch (the step's mapped inputs under the
 * step's own names); returns exactly one entry per request (the step's outputs by own names).
 * An output's first dimension is that request's row count for the next model step: a step may
 * "fan out" (one image → N text lines, N may be 0). Throwing an error with `status` 400 (or an
 * InferenceInputError) answers every request of the batch with 400; for one request's
 * failure return an Error instance in its slot instead (400 when it has `status` 400 or is an
 * InferenceInputError, else 500 naming the step).
 */
export type PipelineStepFunction = (
  requests: readonly PipelineTensors[],
  context: StepContext,
) => Promise<(Record<string, ort.Tensor> | Error)[]> | (Record<string, ort.Tensor> | Error)[];

/** A step module may export `initialize(context)`, awaited once when the pipeline loads. */
export type StepInitialize = (context: StepContext) => Promise<void> | void;

/** The function of every function step by step name; each module imported once. */
export type StepFunctions = ReadonlyMap<string, PipelineStepFunction>;

/**
 * Imports the modules the function steps name (from `dir`, the archive's folder or the
 * folder packing reads them from), checks each export is a function, and with `initialize`
 * set runs each module's `initialize` export once (with the context of its first step). Every problem is reported at once.
 */
export async function loadStepFunctions(
  pipeline: PipelineConfig,
  /** Where an archive file is on disk; undefined when the archive does not hold it. */
  resolveFile: (file: string) => string | undefined,
  /** handler_load_timeout, in ms: each module is first imported in a worker bounded by it. */
  loadTimeoutMs: number,
  initialize?: (step: string) => StepContext,
): Promise<StepFunctions> {
  const modules = new Map<string, Record<string, unknown> | Error>();
  const functions = new Map<string, PipelineStepFunction>();
  const problems: string[] = [];
  const initialized = new Set<string>();
  for (const step of pipeline.steps) {
    if (isModelStep(step)) continue;
    const { file, exportName } = functionReference(step.function);
    let module = modules.get(file);
    if (module === undefined) {
      module = await importStepModule(resolveFile(file), file, loadTimeoutMs).catch((error: Error) => error);
      modules.set(file, module);
      // A stopped import keeps its own code: the fix is the module's import, or the timeout.
      if (module instanceof HandlerLoadTimeoutError) throw module;
      if (module instanceof Error) problems.push(module.message);
    }
    if (module instanceof Error) continue;
    const exported = module[exportName];
    if (typeof exported !== 'function') {
      problems.push(
        `step "${step.name}": ${file} ${exported === undefined ? 'does not export' : 'exports a non-function'} "${exportName}"`,
      );
      continue;
    }
    functions.set(step.name, exported as PipelineStepFunction);
    const init = module.initialize;
    if (initialize && typeof init === 'function' && !initialized.has(file)) {
      initialized.add(file);
      await (init as StepInitialize)(initialize(step.name));
    }
  }
  if (problems.length > 0) throw new HandlerInvalidError(`pipeline steps: ${problems.join('; ')}`);
  return functions;
}

async function importStepModule(
  path: string | undefined,
  file: string,
  loadTimeoutMs: number,
): Promise<Record<string, unknown>> {
  const extension = extname(file).toLowerCase();
  if (!(HANDLER_EXTENSIONS as readonly string[]).includes(extension)) {
    throw new HandlerInvalidError(`${file}: expected a ${HANDLER_EXTENSIONS.join('/')} file`);
  }
  if (path === undefined || !(await stat(path).catch(() => undefined))?.isFile()) {
    throw new HandlerInvalidError(`${file} is not in the archive (pack it with --extra-files)`);
  }
  // What the module does at import (a loop, process.exit) must not hang or end this process.
  await checkHandlerImport(path, loadTimeoutMs, 'step module');
  return importHandlerModule(path, extension);
}

/** The context a step's function and its module's `initialize` get. */
export function stepContext(pipeline: string, step: string, version: string, dir: string): StepContext {
  return Object.freeze({ pipeline, step, version, dir, Tensor: ort.Tensor });
}

/** Joins an archive-relative step file to the folder it lives in, never reaching outside it. */
export function fileIn(dir: string): (file: string) => string {
  return (file) => pathInside(dir, file, 'pipeline step file');
}
