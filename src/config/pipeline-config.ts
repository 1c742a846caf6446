import type { TensorSpec } from '../core/tensors.js';
import { MODEL_NAME_HINT, MODEL_NAME_PATTERN } from '../core/model-name.js';
import type { FieldSpec } from './schema-kit.js';

/** `steps.ts#prepare`: an archive file (JavaScript or TypeScript) and the name it exports. */
export const FUNCTION_REFERENCE = /^[^/\\#][^\\#]*\.(js|mjs|ts|mts)#[A-Za-z_$][\w$]*$/;

/** onnxruntime's tensors have at most this many dimensions in practice; an axis past it is a typo. */
const MAX_RANK = 32;
/** A padded size: what one typed array can index. */
const MAX_PADDED_SIZE = 2 ** 31 - 1;
/** Each step is a node of the graph checked at load; a longer pipeline is a generated mistake. */
const MAX_STEPS = 256;

const tensorMap = (what: string): FieldSpec => ({
  kind: 'map',
  keyHint: what,
  values: { kind: 'string', description: 'A pipeline tensor name.' },
  description: `Maps each ${what} to a pipeline tensor.`,
});

/** The `pipeline` key of model-config.yaml (Triton's ensemble_scheduling, with function steps). */
export const pipelineSchema = {
  kind: 'object',
  optional: true,
  description:
    "Makes the archive a pipeline (docs/pipelines.md): no ONNX model of its own; each request runs through the steps, each step a loaded model (batched by that model's own batcher) or a JavaScript/TypeScript function in the archive. `inputs` and `outputs` are required and name the pipeline's own tensors; `max_batch_size` is how many pipeline requests a function step sees at once and `instances` how many pipeline batches run at once (their devices are ignored). Models named by steps are checked when the pipeline loads (they must be loaded first).",
  fields: {
    steps: {
      kind: 'array',
      minItems: 1,
      maxItems: MAX_STEPS,
      default: [],
      description: 'The steps; they run in the order their tensors need, whatever the order listed.',
      items: {
        kind: 'object',
        description:
          'One step: either `function` (with `inputs`/`outputs`) or `model` (with `input_map`/`output_map`).',
        fields: {
          name: {
            kind: 'string',
            pattern: MODEL_NAME_PATTERN,
            patternHint: MODEL_NAME_HINT,
            description: 'Unique step name; labels its statistics and metrics and names it in errors.',
          },
          function: {
            kind: 'string',
            pattern: FUNCTION_REFERENCE,
            patternHint: 'file.ts#exportName (a .js/.mjs/.ts/.mts file packed with --extra-files)',
            description: 'A function step: `file#export`, called with the whole batch of pipeline requests.',
          },
          inputs: tensorMap("the function's own input name"),
          outputs: tensorMap("the function's own output name"),
          model: {
            kind: 'string',
            pattern: MODEL_NAME_PATTERN,
            patternHint: MODEL_NAME_HINT,
            description: 'A model step: the name of a loaded model; its requests go through its batcher.',
          },
          version: {
            kind: 'string',
            description: "The model's version; default: whichever version answers when none is named.",
          },
          input_map: tensorMap('model input'),
          output_map: tensorMap('model output'),
          pad: {
            kind: 'map',
            keyHint: 'model input',
            description:
              "Pads a model input along one axis to a bucket size, so requests of different widths share a batch (the model's outputs are not cropped back).",
            values: {
              kind: 'object',
              description: 'How one input is padded.',
              fields: {
                axis: {
                  kind: 'integer',
                  min: 1,
                  max: MAX_RANK - 1,
                  description: 'The axis padded (0 is the rows).',
                },
                multiple: {
                  kind: 'integer',
                  min: 1,
                  max: MAX_PADDED_SIZE,
                  description: 'Sizes are rounded up to a multiple of this.',
                },
                max: {
                  kind: 'integer',
                  min: 1,
                  max: MAX_PADDED_SIZE,
                  description: 'Largest size after padding; a longer one is that request’s 400. Default: none.',
                },
                value: { kind: 'number', default: 0, description: 'The value padded with.' },
              },
            },
          },
        },
      },
    },
  },
} as const satisfies FieldSpec;

export interface PadSpec {
  readonly axis: number;
  readonly multiple: number;
  readonly max?: number;
  readonly value: number;
}

export interface FunctionStepConfig {
  readonly name: string;
  /** `file#export`. */
  readonly function: string;
  /** The function's own name → pipeline tensor. */
  readonly inputs: Readonly<Record<string, string>>;
  readonly outputs: Readonly<Record<string, string>>;
}

export interface ModelStepConfig {
  readonly name: string;
  readonly model: string;
  readonly version?: string;
  /** Model input → pipeline tensor. */
  readonly input_map: Readonly<Record<string, string>>;
  /** Model output → pipeline tensor. */
  readonly output_map: Readonly<Record<string, string>>;
  readonly pad?: Readonly<Record<string, PadSpec>>;
}

export type PipelineStepConfig = FunctionStepConfig | ModelStepConfig;

export interface PipelineConfig {
  readonly steps: readonly PipelineStepConfig[];
}

export function isModelStep(step: PipelineStepConfig): step is ModelStepConfig {
  return 'model' in step;
}

/** The step's tensors as (step's own name, pipeline tensor) pairs. */
export function stepInputs(step: PipelineStepConfig): Readonly<Record<string, string>> {
  return isModelStep(step) ? step.input_map : step.inputs;
}

export function stepOutputs(step: PipelineStepConfig): Readonly<Record<string, string>> {
  return isModelStep(step) ? step.output_map : step.outputs;
}

/** A function reference split: the archive file and the export. */
export function functionReference(reference: string): { file: string; exportName: string } {
  const at = reference.lastIndexOf('#');
  return { file: reference.slice(0, at), exportName: reference.slice(at + 1) };
}

/**
 * Everything wrong with a pipeline's wiring that the config alone shows: step kinds, names,
 * tensors nobody produces or two steps produce, outputs nobody produces, cycles. Models are
 * unknown here; they are checked when the pipeline loads.
 */
export function pipelineProblems(
  pipeline: PipelineConfig,
  inputs: readonly TensorSpec[] | undefined,
  outputs: readonly TensorSpec[] | undefined,
): string[] {
  const problems: string[] = [];
  if (inputs === undefined)
    problems.push('inputs: a pipeline must list its inputs (it has no model to take them from)');
  if (outputs === undefined) {
    problems.push('outputs: a pipeline must list its outputs (it has no model to take them from)');
  }
  if (pipeline.steps.length === 0) problems.push('pipeline.steps: a pipeline needs at least one step');
  const producers = new Map<string, string>();
  for (const spec of inputs ?? []) producers.set(spec.name, 'the pipeline input');
  const names = new Set<string>();
  pipeline.steps.forEach((raw, index) => {
    const step = raw as Partial<FunctionStepConfig & ModelStepConfig>;
    const where = `pipeline.steps[${index}]`;
    if (step.name !== undefined) {
      if (names.has(step.name)) problems.push(`${where}.name: "${step.name}" is used by another step`);
      names.add(step.name);
    } else {
      problems.push(`${where}.name: required`);
    }
    problems.push(...stepKindProblems(step, where));
    for (const tensor of Object.values(stepOutputs(raw) ?? {})) {
      const other = producers.get(tensor);
      if (other !== undefined) {
        problems.push(`${where}: tensor "${tensor}" is already produced by ${other}`);
      } else {
        producers.set(tensor, `step "${String(step.name)}"`);
      }
    }
  });
  pipeline.steps.forEach((step, index) => {
    for (const [own, tensor] of Object.entries(stepInputs(step) ?? {})) {
      if (!producers.has(tensor)) {
        problems.push(
          `pipeline.steps[${index}]: input "${own}" reads tensor "${tensor}", which no step or pipeline input produces`,
        );
      }
    }
  });
  outputs?.forEach((spec, index) => {
    if (!producers.has(spec.name)) problems.push(`outputs[${index}]: no step produces "${spec.name}"`);
  });
  const { cyclic } = orderSteps(pipeline.steps);
  if (cyclic.length > 0) {
    problems.push(`pipeline.steps: a cycle among ${cyclic.map((step) => `"${step.name}"`).join(', ')}`);
  }
  return problems;
}

function stepKindProblems(step: Partial<FunctionStepConfig & ModelStepConfig>, where: string): string[] {
  const problems: string[] = [];
  const isFunction = step.function !== undefined;
  const isModel = step.model !== undefined;
  if (isFunction === isModel) {
    problems.push(`${where}: give either "function" or "model"`);
    return problems;
  }
  const [own, foreign] = isFunction
    ? [
        ['inputs', 'outputs'],
        ['input_map', 'output_map', 'version', 'pad'],
      ]
    : [
        ['input_map', 'output_map'],
        ['inputs', 'outputs'],
      ];
  for (const key of own as (keyof typeof step)[]) {
    if (step[key] === undefined)
      problems.push(`${where}.${key}: required for a ${isFunction ? 'function' : 'model'} step`);
  }
  for (const key of foreign as (keyof typeof step)[]) {
    if (step[key] !== undefined) problems.push(`${where}.${key}: only for a ${isFunction ? 'model' : 'function'} step`);
  }
  if (step.pad && step.input_map) {
    for (const input of Object.keys(step.pad)) {
      if (!(input in step.input_map)) problems.push(`${where}.pad.${input}: not an input in input_map`);
    }
  }
  for (const key of ['inputs', 'outputs', 'input_map', 'output_map'] as const) {
    const values = Object.values(step[key] ?? {});
    const repeated = values.find((tensor, index) => values.indexOf(tensor) !== index);
    if (repeated !== undefined && key.startsWith('output')) {
      problems.push(`${where}.${key}: tensor "${repeated}" is produced twice`);
    }
  }
  return problems;
}

/**
 * The steps in an order where every step comes after the producers of its inputs (Kahn's
 * algorithm, listed order among ready steps); `cyclic` holds the steps that never became ready.
 */
export function orderSteps<T extends PipelineStepConfig>(steps: readonly T[]): { order: T[]; cyclic: T[] } {
  const producerOf = new Map<string, T>();
  for (const step of steps) for (const tensor of Object.values(stepOutputs(step) ?? {})) producerOf.set(tensor, step);
  const needs = new Map<T, Set<T>>();
  for (const step of steps) {
    const before = new Set<T>();
    for (const tensor of Object.values(stepInputs(step) ?? {})) {
      const producer = producerOf.get(tensor);
      if (producer !== undefined) before.add(producer);
    }
    needs.set(step, before);
  }
  const order: T[] = [];
  const placed = new Set<T>();
  let progress = true;
  while (progress) {
    progress = false;
    for (const step of steps) {
      if (placed.has(step)) continue;
      if ([...(needs.get(step) ?? [])].every((before) => placed.has(before))) {
        order.push(step);
        placed.add(step);
        progress = true;
      }
    }
  }
  return { order, cyclic: steps.filter((step) => !placed.has(step)) };
}
