import type ort from 'onnxruntime-node';
import type { SubmitOptions, SubmitResult } from '../batching/batcher.js';
import type { ModelStepConfig } from '../config/pipeline-config.js';
import {
  BatchserveError,
  InferenceInputError,
  PipelineStepError,
  QueueTimeoutError,
  RequestCancelledError,
} from '../core/errors.js';
import type { HandlerRequest } from '../core/request.js';
import {
  batchPlacement,
  checkRequestTensors,
  isTensors,
  rowsOf,
  splitRows,
  stackRows,
  type Tensor,
  type Tensors,
  type TensorSpec,
} from '../core/tensors.js';
import { fromOrtTensor, toOrtTensor } from '../handlers/ort-tensors.js';
import { emptyRows, padToBucket } from './pad.js';

/** What a model step needs of a loaded model version: its tensors, batch size and batcher. */
export interface StepModel {
  readonly name: string;
  readonly version: string;
  readonly config: {
    readonly inputs: readonly TensorSpec[];
    readonly outputs: readonly TensorSpec[];
    readonly max_batch_size: number;
  };
  infer(request: HandlerRequest, options: SubmitOptions): Promise<SubmitResult>;
}

/**
 * Finds a loaded model version (the default one when `version` is undefined); throws
 * ModelNotFoundError. Injected by the repository, so pipelines never import it.
 */
export type ModelLookup = (name: string, version?: string) => StepModel;

/** Where a pipeline request stands: its tensors so far, its deadline and cancellation. */
export interface RequestState {
  readonly tensors: Map<string, ort.Tensor>;
  readonly deadline: number | undefined;
  readonly signal: AbortSignal | undefined;
}

/**
 * Runs one request's rows through a model step: its mapped (and padded) tensors go to the
 * model's batcher as one request — in chunks of at most the model's max_batch_size rows —
 * so they batch with other requests' rows. No rows: no call, empty outputs. The pipeline's
 * steps hold onnxruntime tensors; the model step hands the model plain ones, as any request.
 */
export async function runModelStep(
  step: ModelStepConfig,
  state: RequestState,
  lookup: ModelLookup,
): Promise<Map<string, ort.Tensor>> {
  const model = lookup(step.model, step.version);
  const feeds: Tensors = {};
  for (const [input, tensor] of Object.entries(step.input_map)) {
    const value = state.tensors.get(tensor) as ort.Tensor;
    const pad = step.pad?.[input];
    feeds[input] = fromOrtTensor(pad ? padToBucket(value, pad, input) : value, input);
  }
  const rows = rowsOf(Object.values(feeds)[0] as Tensor);
  const outputs = new Map<string, ort.Tensor>();
  if (rows === 0) {
    for (const [output, tensor] of Object.entries(step.output_map)) {
      const spec = model.config.outputs.find((candidate) => candidate.name === output);
      if (spec) outputs.set(tensor, emptyRows(spec));
    }
    return outputs;
  }
  checkRequestTensors(feeds, model.config.inputs);
  const { shapeKey } = batchPlacement(feeds, model.config.inputs, true);
  const chunkRows = chunkSizes(rows, model.config.max_batch_size);
  const chunks = chunkRows.length === 1 ? [feeds] : splitFeeds(feeds, chunkRows);
  const answers = await Promise.all(
    chunks.map((chunk, index) => submit(model, chunk, chunkRows[index] as number, shapeKey, state, step.name)),
  );
  for (const [output, tensor] of Object.entries(step.output_map)) {
    const parts = answers.map((answer) => answer[output]);
    if (parts.some((part) => part === undefined)) {
      throw new PipelineStepError(`step "${step.name}": model ${model.name} did not answer output "${output}"`);
    }
    outputs.set(tensor, toOrtTensor(stackRows(parts as Tensor[])));
  }
  return outputs;
}

async function submit(
  model: StepModel,
  inputs: Tensors,
  rows: number,
  shapeKey: string,
  state: RequestState,
  step: string,
): Promise<Tensors> {
  const timeoutUs = remainingUs(state.deadline);
  if (state.signal?.aborted) throw new RequestCancelledError('the client went away');
  const { response } = await model.infer(
    { kind: 'tensors', inputs, rows, movable: false },
    {
      rows,
      shapeKey,
      ...(timeoutUs === undefined ? {} : { timeoutUs }),
      ...(state.signal ? { signal: state.signal } : {}),
    },
  );
  if (!isTensors(response)) {
    throw new PipelineStepError(`step "${step}": model ${model.name} answered something other than tensors`);
  }
  return response;
}

/** What is left of the pipeline request's time, for the step's own queue; none left is a timeout. */
function remainingUs(deadline: number | undefined): number | undefined {
  if (deadline === undefined) return undefined;
  const left = Math.floor((deadline - performance.now()) * 1000);
  if (left <= 0) throw new QueueTimeoutError('Request timeout expired before this step');
  return left;
}

function chunkSizes(rows: number, maxBatchSize: number): number[] {
  if (maxBatchSize <= 0 || rows <= maxBatchSize) return [rows];
  const sizes: number[] = [];
  for (let left = rows; left > 0; left -= maxBatchSize) sizes.push(Math.min(left, maxBatchSize));
  return sizes;
}

function splitFeeds(feeds: Tensors, sizes: readonly number[]): Tensors[] {
  const chunks: Tensors[] = sizes.map(() => ({}));
  for (const [name, tensor] of Object.entries(feeds)) {
    splitRows(tensor, sizes).forEach((part, index) => {
      (chunks[index] as Tensors)[name] = part;
    });
  }
  return chunks;
}

const INPUT_CODE = InferenceInputError.code;

/** Failures whose class tells the client what to do (retry later, the client left): kept, renamed. */
const KEPT_STATUSES = new Set([429, 499, 503]);

/**
 * A step's failure as its request's answer, the message naming the step: bad input stays a
 * 400, a timeout, cancellation or full queue keeps its code, anything else is a 500.
 */
export function stepFailure(step: string, error: unknown): Error {
  const message = `step "${step}": ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`;
  const { status, code } = (error ?? {}) as { status?: unknown; code?: unknown };
  // A bundled step file carries its own copy of our error classes: their code still says what they are.
  if (error instanceof InferenceInputError || status === 400 || code === INPUT_CODE) {
    return new InferenceInputError(message, { cause: error });
  }
  if (error instanceof BatchserveError && KEPT_STATUSES.has(error.httpStatus)) {
    const Kept = error.constructor as new (message: string, options?: ErrorOptions) => Error;
    return new Kept(message, { cause: error });
  }
  return new PipelineStepError(message, { cause: error });
}
