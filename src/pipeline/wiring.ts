import type { CompleteModelConfig } from '../config/model-config.js';
import { isModelStep, type PipelineConfig } from '../config/pipeline-config.js';
import type { TensorSpec } from '../core/tensors.js';
import type { ModelLookup, StepModel } from './model-step.js';

/**
 * What only the loaded models show: step models not loaded, maps naming inputs or outputs
 * the model lacks, model inputs left unmapped, and tensors whose datatype, rank or fixed
 * dimensions differ between the producer and the consumer (pipeline inputs and outputs and
 * model tensors; function steps' tensors are only known when they run). Every problem at once.
 */
export function wiringProblems(
  config: CompleteModelConfig & { readonly pipeline: PipelineConfig },
  lookup: ModelLookup,
): string[] {
  const problems: string[] = [];
  const known = new Map<string, { spec: TensorSpec; from: string }>();
  for (const spec of config.inputs) known.set(spec.name, { spec, from: 'pipeline input' });
  const models = new Map<string, StepModel>();
  for (const step of config.pipeline.steps) {
    if (!isModelStep(step)) continue;
    try {
      models.set(step.name, lookup(step.model, step.version));
    } catch {
      const version = step.version === undefined ? '' : ` version ${step.version}`;
      problems.push(`step "${step.name}": model ${step.model}${version} is not loaded (load it before the pipeline)`);
    }
  }
  for (const step of config.pipeline.steps) {
    const model = isModelStep(step) ? models.get(step.name) : undefined;
    if (!isModelStep(step) || !model) continue;
    const where = `step "${step.name}" (model ${model.name} version ${model.version})`;
    if (model.config.max_batch_size === 0) {
      problems.push(`${where}: the model does not batch (max_batch_size 0); model steps need one that does`);
    }
    for (const [output, tensor] of Object.entries(step.output_map)) {
      const spec = model.config.outputs.find((candidate) => candidate.name === output);
      if (spec) known.set(tensor, { spec, from: `${where} output "${output}"` });
    }
  }
  for (const step of config.pipeline.steps) {
    const model = isModelStep(step) ? models.get(step.name) : undefined;
    if (!isModelStep(step) || !model) continue;
    const where = `step "${step.name}" (model ${model.name} version ${model.version})`;
    const names = (specs: readonly TensorSpec[]): string => specs.map((spec) => spec.name).join(', ');
    for (const spec of model.config.inputs) {
      if (!(spec.name in step.input_map))
        problems.push(`${where}: input_map leaves the model's input "${spec.name}" unfed`);
    }
    for (const [input, tensor] of Object.entries(step.input_map)) {
      const spec = model.config.inputs.find((candidate) => candidate.name === input);
      if (!spec) {
        problems.push(
          `${where}: input_map names "${input}", not an input of the model (${names(model.config.inputs)})`,
        );
        continue;
      }
      const producer = known.get(tensor);
      if (producer) {
        problems.push(
          ...mismatches(producer.spec, spec, step.pad?.[input]?.axis).map(
            (why) => `${where}: input "${input}" reads "${tensor}" from ${producer.from}: ${why}`,
          ),
        );
      }
    }
    for (const output of Object.keys(step.output_map)) {
      if (!model.config.outputs.some((candidate) => candidate.name === output)) {
        problems.push(
          `${where}: output_map names "${output}", not an output of the model (${names(model.config.outputs)})`,
        );
      }
    }
  }
  for (const spec of config.outputs) {
    const producer = known.get(spec.name);
    if (producer && producer.from !== 'pipeline input') {
      problems.push(
        ...mismatches(producer.spec, spec).map((why) => `output "${spec.name}" from ${producer.from}: ${why}`),
      );
    }
  }
  return problems;
}

/** Datatype, rank and the dimensions fixed on both sides (but the padded axis). */
function mismatches(produced: TensorSpec, consumed: TensorSpec, paddedAxis?: number): string[] {
  if (produced.datatype !== consumed.datatype) {
    return [`datatype ${produced.datatype}, expected ${consumed.datatype}`];
  }
  if (produced.shape.length !== consumed.shape.length) {
    return [
      `shape [${produced.shape.join(', ')}] has rank ${produced.shape.length}, expected [${consumed.shape.join(', ')}]`,
    ];
  }
  const differs = produced.shape.some(
    (dim, axis) => axis !== paddedAxis && dim !== -1 && consumed.shape[axis] !== -1 && dim !== consumed.shape[axis],
  );
  return differs ? [`shape [${produced.shape.join(', ')}], expected [${consumed.shape.join(', ')}]`] : [];
}
