import type { CompleteModelConfig, ModelConfig } from '../config/model-config.js';
import type { PipelineConfig } from '../config/pipeline-config.js';
import { deepFreeze } from '../config/schema-kit.js';
import { ConfigInvalidError, PipelineInvalidError } from '../core/errors.js';
import { DEFAULT_MAX_BATCH_SIZE } from '../runtime/reconcile.js';
import type { ModelLookup } from './model-step.js';
import { PipelineInstance } from './pipeline-instance.js';
import { fileIn, loadStepFunctions, stepContext } from './step-function.js';
import { wiringProblems } from './wiring.js';

export type PipelineModelConfig = CompleteModelConfig & { readonly pipeline: PipelineConfig };

/**
 * A pipeline's config completed as packing completes a model's from its ONNX graph: inputs
 * and outputs must be listed (validation said so), and max_batch_size follows the same rule.
 */
export function completePipelineConfig(config: ModelConfig, source: string): PipelineModelConfig {
  const { inputs, outputs, pipeline } = config;
  if (!pipeline || !inputs || !outputs) throw new ConfigInvalidError(source, ['pipeline: needs inputs and outputs']);
  const batchable = [...inputs, ...outputs].every((spec) => spec.shape[0] === -1);
  return deepFreeze({
    ...config,
    inputs,
    outputs,
    pipeline,
    max_batch_size: config.max_batch_size ?? (batchable ? DEFAULT_MAX_BATCH_SIZE : 0),
  });
}

export interface PipelineSpec {
  readonly name: string;
  readonly version: string;
  /** The extracted archive. */
  readonly dir: string;
  readonly config: ModelConfig;
  /** Names the config in errors. */
  readonly configSource: string;
  readonly lookup: ModelLookup;
  readonly stepFinished?: (step: string, ns: number) => void;
}

export interface OpenedPipeline {
  readonly config: PipelineModelConfig;
  readonly instances: readonly PipelineInstance[];
  readonly createInstance: (index: number) => PipelineInstance;
}

/**
 * Checks the pipeline against the models loaded now (PipelineInvalidError lists every
 * problem), imports its step functions and runs their `initialize`, and makes its instances.
 */
export async function openPipeline(spec: PipelineSpec): Promise<OpenedPipeline> {
  const config = completePipelineConfig(spec.config, spec.configSource);
  const problems = wiringProblems(config, spec.lookup);
  if (problems.length > 0) throw new PipelineInvalidError(spec.name, problems);
  const functions = await loadStepFunctions(
    config.pipeline,
    fileIn(spec.dir),
    config.handler_load_timeout / 1000,
    (step) => stepContext(spec.name, step, spec.version, spec.dir),
  );
  const createInstance = (index: number): PipelineInstance =>
    new PipelineInstance(`${spec.name}:${spec.version}:${index}`, {
      name: spec.name,
      version: spec.version,
      dir: spec.dir,
      config,
      functions,
      lookup: spec.lookup,
      ...(spec.stepFinished ? { stepFinished: spec.stepFinished } : {}),
    });
  const count = config.instances.reduce((total, group) => total + group.count, 0);
  return { config, instances: Array.from({ length: count }, (_, index) => createInstance(index)), createInstance };
}
