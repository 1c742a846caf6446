import ort from 'onnxruntime-node';
import type { CompleteModelConfig } from '../config/model-config.js';
import {
  isModelStep,
  orderSteps,
  type FunctionStepConfig,
  type ModelStepConfig,
  type PipelineConfig,
  type PipelineStepConfig,
} from '../config/pipeline-config.js';
import { InferenceInputError, PipelineStepError } from '../core/errors.js';
import type { BatchTimings, HandlerRequest } from '../core/request.js';
import type { Tensors } from '../core/tensors.js';
import { fromOrtTensor, toOrtTensor } from '../handlers/ort-tensors.js';
import type { ServingInstance } from '../runtime/local-instance.js';
import { runModelStep, stepFailure, type ModelLookup, type RequestState } from './model-step.js';
import { stepContext, type StepContext, type StepFunctions } from './step-function.js';

export interface PipelineParts {
  readonly name: string;
  readonly version: string;
  /** The extracted archive. */
  readonly dir: string;
  readonly config: CompleteModelConfig & { readonly pipeline: PipelineConfig };
  readonly functions: StepFunctions;
  readonly lookup: ModelLookup;
  /** Called after each step with the time it took for the batch (statistics, metrics). */
  readonly stepFinished?: (step: string, ns: number) => void;
}

/**
 * One pipeline batch at a time, as the batcher sees a model instance: each step in dependency
 * order, function steps on the whole batch, model steps per request through that model's own
 * batcher (so rows batch across requests and across pipeline batches in flight). A request
 * that fails in a step is answered with its error; the others go on.
 */
export class PipelineInstance implements ServingInstance {
  readonly device = 'pipeline';
  readonly #parts: PipelineParts;
  readonly #order: readonly PipelineStepConfig[];
  readonly #contexts: ReadonlyMap<string, StepContext>;

  constructor(
    readonly id: string,
    parts: PipelineParts,
  ) {
    this.#parts = parts;
    this.#order = orderSteps(parts.config.pipeline.steps).order;
    this.#contexts = new Map(
      this.#order.map((step) => [step.name, stepContext(parts.name, step.name, parts.version, parts.dir)]),
    );
  }

  async run(requests: readonly HandlerRequest[]): Promise<{ responses: unknown[]; timings: BatchTimings }> {
    const started = process.hrtime.bigint();
    const failures: (Error | undefined)[] = new Array<Error | undefined>(requests.length);
    const states = requests.map((request, index) => {
      try {
        return this.#start(request);
      } catch (error) {
        failures[index] = error as Error;
        return undefined;
      }
    });
    for (const step of this.#order) {
      const live = states.flatMap((state, index) => (state && !failures[index] ? [index] : []));
      if (live.length === 0) break;
      const stepStarted = process.hrtime.bigint();
      if (isModelStep(step)) await this.#runModel(step, live, states as RequestState[], failures);
      else await this.#runFunction(step, live, states as RequestState[], failures);
      this.#parts.stepFinished?.(step.name, Number(process.hrtime.bigint() - stepStarted));
    }
    const responses = states.map((state, index) => failures[index] ?? this.#outputs(state as RequestState));
    return {
      responses,
      timings: { computeInputNs: 0, computeInferNs: Number(process.hrtime.bigint() - started), computeOutputNs: 0 },
    };
  }

  release(): Promise<void> {
    return Promise.resolve();
  }

  /**
   * The request's pipeline inputs, as onnxruntime tensors for its steps: its v2 tensors, or a
   * TorchServe body as the one BYTES input.
   */
  #start(request: HandlerRequest): RequestState {
    const tensors = new Map<string, ort.Tensor>();
    if (request.kind === 'tensors') {
      for (const [name, tensor] of Object.entries(request.inputs)) tensors.set(name, toOrtTensor(tensor));
    } else {
      const [only, ...others] = this.#parts.config.inputs;
      if (request.kind !== 'body' || !only || others.length > 0 || only.datatype !== 'BYTES') {
        throw new InferenceInputError(
          'this pipeline takes v2 tensors; a /predictions body needs a pipeline whose one input is BYTES',
        );
      }
      const dims = only.shape.map((dim) => (dim === -1 ? 1 : dim));
      if (dims.reduce((a, b) => a * b, 1) !== 1) {
        throw new InferenceInputError(`input "${only.name}" holds more than one element; send v2 tensors`);
      }
      // One character per byte: the step gets the exact bytes back with Buffer.from(s, 'latin1').
      tensors.set(only.name, new ort.Tensor('string', [request.body.toString('latin1')], dims));
    }
    return { tensors, deadline: request.deadline, signal: request.signal };
  }

  async #runModel(
    step: ModelStepConfig,
    live: readonly number[],
    states: readonly RequestState[],
    failures: (Error | undefined)[],
  ): Promise<void> {
    await Promise.all(
      live.map(async (index) => {
        const state = states[index] as RequestState;
        try {
          for (const [tensor, value] of await runModelStep(step, state, this.#parts.lookup)) {
            state.tensors.set(tensor, value);
          }
        } catch (error) {
          failures[index] = stepFailure(step.name, error);
        }
      }),
    );
  }

  async #runFunction(
    step: FunctionStepConfig,
    live: readonly number[],
    states: readonly RequestState[],
    failures: (Error | undefined)[],
  ): Promise<void> {
    const run = this.#parts.functions.get(step.name);
    const inputs = live.map((index) => {
      const { tensors } = states[index] as RequestState;
      const own: Record<string, ort.Tensor> = {};
      for (const [name, tensor] of Object.entries(step.inputs)) own[name] = tensors.get(tensor) as ort.Tensor;
      return Object.freeze(own);
    });
    let results: unknown;
    try {
      if (!run) throw new PipelineStepError('its function is not loaded');
      results = await run(inputs, this.#contexts.get(step.name) as StepContext);
    } catch (error) {
      for (const index of live) failures[index] = stepFailure(step.name, error);
      return;
    }
    if (!Array.isArray(results) || results.length !== live.length) {
      const got = Array.isArray(results) ? `${results.length} results` : typeof results;
      for (const index of live) {
        failures[index] = new PipelineStepError(`step "${step.name}" returned ${got} for ${live.length} requests`);
      }
      return;
    }
    live.forEach((index, slot) => {
      const result: unknown = results[slot];
      if (result instanceof Error) {
        failures[index] = stepFailure(step.name, result);
        return;
      }
      const { tensors } = states[index] as RequestState;
      for (const [own, tensor] of Object.entries(step.outputs)) {
        const value = (result as Record<string, unknown> | null)?.[own];
        if (!(value instanceof ort.Tensor)) {
          failures[index] = new PipelineStepError(`step "${step.name}" returned no tensor "${own}"`);
          return;
        }
        tensors.set(tensor, value);
      }
    });
  }

  /** The pipeline's outputs, plain again for the server's thread. */
  #outputs(state: RequestState): Tensors | Error {
    const outputs: Tensors = {};
    for (const spec of this.#parts.config.outputs) {
      const tensor = state.tensors.get(spec.name);
      if (!tensor) return new PipelineStepError(`no step produced output "${spec.name}"`);
      try {
        outputs[spec.name] = fromOrtTensor(tensor, spec.name);
      } catch (error) {
        return error as Error;
      }
    }
    return outputs;
  }
}
