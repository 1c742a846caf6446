import { ModelSignatureMismatchError } from '../core/errors.js';
import type { GraphSignature } from './session.js';
import { deepFreeze } from '../config/schema-kit.js';
import type { CompleteModelConfig, ModelConfig } from '../config/model-config.js';
import type { TensorSpec } from '../core/tensors.js';

/** Rows per batch a config-less archive gets when its model has a variable batch dimension. */
export const DEFAULT_MAX_BATCH_SIZE = 16;

/**
 * Checks a config against the model's real signature and fills in what the config left out
 * (inputs, outputs, max_batch_size). Every disagreement is reported at once.
 */
export function reconcileWithModel(config: ModelConfig, model: GraphSignature, source: string): CompleteModelConfig {
  const problems: string[] = [];
  const inputs = config.inputs ?? model.inputs;
  const outputs = config.outputs ?? model.outputs;

  const modelInputs = new Map(model.inputs.map((spec) => [spec.name, spec]));
  const modelOutputs = new Map(model.outputs.map((spec) => [spec.name, spec]));
  compareTensors('inputs', inputs, modelInputs, problems);
  compareTensors('outputs', outputs, modelOutputs, problems);
  const listed = new Set(inputs.map((spec) => spec.name));
  for (const name of modelInputs.keys()) {
    if (!listed.has(name)) problems.push(`inputs: the model's input "${name}" is missing`);
  }

  const batchable = [...inputs, ...outputs].every((spec) => spec.shape[0] === -1);
  const maxBatchSize = config.max_batch_size ?? (batchable ? DEFAULT_MAX_BATCH_SIZE : 0);
  if (maxBatchSize > 0) {
    for (const [key, specs] of [
      ['inputs', inputs],
      ['outputs', outputs],
    ] as const) {
      specs.forEach((spec, index) => {
        const modelSpec = (key === 'inputs' ? modelInputs : modelOutputs).get(spec.name);
        if (modelSpec && modelSpec.shape.length > 0 && modelSpec.shape[0] !== -1) {
          problems.push(
            `${key}[${index}] "${spec.name}": max_batch_size is ${maxBatchSize} but the model fixes the batch dimension to ${modelSpec.shape[0]}`,
          );
        }
      });
    }
  }
  if (problems.length > 0) throw new ModelSignatureMismatchError(source, problems);
  return deepFreeze({ ...config, inputs, outputs, max_batch_size: maxBatchSize });
}

function compareTensors(
  key: 'inputs' | 'outputs',
  specs: readonly TensorSpec[],
  model: ReadonlyMap<string, TensorSpec>,
  problems: string[],
): void {
  specs.forEach((spec, index) => {
    const where = `${key}[${index}] "${spec.name}"`;
    const actual = model.get(spec.name);
    if (!actual) {
      problems.push(`${where}: the model has no such ${key.slice(0, -1)} (it has ${[...model.keys()].join(', ')})`);
      return;
    }
    if (actual.datatype !== spec.datatype) {
      problems.push(`${where}: datatype ${spec.datatype}, but the model's is ${actual.datatype}`);
    }
    // With a reshape, the model has the reshaped shape; requests keep `shape`.
    const shape = spec.reshape ?? spec.shape;
    const what = spec.reshape ? 'reshape' : 'rank';
    if (actual.shape.length !== shape.length) {
      problems.push(
        `${where}: ${what} ${shape.length} [${shape.join(', ')}], but the model's is ${actual.shape.length} [${actual.shape.join(', ')}]`,
      );
      return;
    }
    shape.forEach((dim, axis) => {
      const modelDim = actual.shape[axis] as number;
      if (modelDim !== -1 && dim !== modelDim) {
        problems.push(`${where}: dimension ${axis} is ${dim}, but the model fixes it to ${modelDim}`);
      }
    });
  });
}
