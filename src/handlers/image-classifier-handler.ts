import ort from 'onnxruntime-node';
import { InferenceInputError } from '../core/errors.js';
import { modelConfigSchema, type ImageClassifierOptions } from '../config/model-config.js';
import { checkImageClassifierInput } from './image-input.js';
import { validateField } from '../config/schema-kit.js';
import type { TensorSpec } from '../core/tensors.js';
import type { TensorMap } from './ort-tensors.js';
import { decodeImage, imageToRow, type ImageGeometry } from './image.js';
import { requestTensors, splitOutputs, stackRequests, tensorHandler } from './tensor-handler.js';
import type { Handler, HandlerContext } from './types.js';

export interface Classification {
  readonly label: string;
  readonly score: number;
}

/**
 * Built-in handler for image classifiers: image bytes (PNG or JPEG) in, the top-k
 * `{label, score}` out. Requests that already carry tensors (KServe v2) pass through
 * and get tensors back.
 */
export const imageClassifierHandler: Handler = {
  initialize: ({ config }) => checkImageClassifierInput(config),
  preprocess(requests, context) {
    const input = imageInput(context);
    const options = imageOptions(context);
    const geometry = geometryOf(input, options);
    const perRequest = requests.map((request): TensorMap => {
      if (request.kind !== 'body') return requestTensors(request, context);
      const row = imageToRow(decodeImage(request.body), geometry, options);
      const dims =
        options.layout === 'NCHW'
          ? [1, geometry.channels, geometry.height, geometry.width]
          : [1, geometry.height, geometry.width, geometry.channels];
      return { [input.name]: new ort.Tensor('float32', row, dims) };
    });
    return stackRequests(perRequest, context);
  },
  inference: (inputs, context) => tensorHandler.inference(inputs, context),
  postprocess(outputs, requests, context) {
    const scoresName = context.config.outputs[0]?.name as string;
    const perRequest = splitOutputs(outputs, requests);
    const options = imageOptions(context);
    return requests.map((request, index) => {
      const tensors = perRequest[index] as TensorMap;
      if (request.kind === 'tensors') return tensors;
      return topK(tensors[scoresName] as ort.Tensor, options, context.labels);
    });
  },
};

function imageInput({ config }: HandlerContext): TensorSpec {
  const input = config.inputs[0];
  if (config.inputs.length !== 1 || !input || input.datatype !== 'FP32' || input.shape.length !== 4) {
    throw new InferenceInputError('the image-classifier handler needs one FP32 input of rank 4 (NCHW or NHWC)');
  }
  return input;
}

let defaultOptions: ImageClassifierOptions | undefined;

function imageOptions({ config }: HandlerContext): ImageClassifierOptions {
  defaultOptions ??= validateField(
    modelConfigSchema.fields.image_classifier,
    {},
    'image_classifier',
    [],
  ) as ImageClassifierOptions;
  return config.image_classifier ?? defaultOptions;
}

function geometryOf(input: TensorSpec, options: ImageClassifierOptions): ImageGeometry {
  const [, a, b, c] = input.shape as [number, number, number, number];
  const geometry =
    options.layout === 'NCHW' ? { channels: a, height: b, width: c } : { height: a, width: b, channels: c };
  if (geometry.height < 1 || geometry.width < 1 || geometry.channels < 1) {
    throw new InferenceInputError(
      `the image-classifier handler needs fixed image dimensions in the config's input shape, got [${input.shape.join(', ')}]`,
    );
  }
  return geometry;
}

/** Top-k classes of the request's first row of scores. */
export function topK(
  scores: ort.Tensor,
  options: ImageClassifierOptions,
  labels?: readonly string[],
): Classification[] {
  const classes = scores.dims[scores.dims.length - 1] ?? 0;
  return topKOfRow((scores.data as Float32Array).subarray(0, classes), options, labels);
}

/** Top-k classes of one row of scores, best first: softmax as `options.softmax` says. */
export function topKOfRow(
  scores: Float32Array,
  options: Pick<ImageClassifierOptions, 'softmax' | 'top_k'>,
  labels?: readonly string[],
): Classification[] {
  const row = Array.from(scores);
  const sum = row.reduce((a, b) => a + b, 0);
  const isDistribution = row.every((p) => p >= 0 && p <= 1) && Math.abs(sum - 1) < 1e-3;
  const probabilities =
    options.softmax === 'always' || (options.softmax === 'auto' && !isDistribution) ? softmax(row) : row;
  return probabilities
    .map((score, index) => ({ label: labels?.[index] ?? String(index), score }))
    .sort((a, b) => b.score - a.score)
    .slice(0, options.top_k);
}

function softmax(values: readonly number[]): number[] {
  const max = Math.max(...values);
  const exps = values.map((value) => Math.exp(value - max));
  const total = exps.reduce((a, b) => a + b, 0);
  return exps.map((value) => value / total);
}
