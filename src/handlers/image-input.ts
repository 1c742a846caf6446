import { HandlerInvalidError } from '../core/errors.js';
import type { CompleteModelConfig } from '../config/model-config.js';

// Apart from the handler, so pack can check an archive without loading image decoders.

/**
 * What the handler needs to resize an image into the model's input, checked at pack and at
 * load: one FP32 input of rank 4 whose channels, height and width are fixed, by the model or by
 * the config's `inputs` (a model with dynamic sizes, such as a detector, is given one there).
 */
export function checkImageClassifierInput(config: CompleteModelConfig): void {
  const input = config.inputs[0];
  if (config.inputs.length !== 1 || !input || input.datatype !== 'FP32' || input.shape.length !== 4) {
    throw new HandlerInvalidError(
      `the image-classifier handler needs one FP32 input of rank 4 (NCHW or NHWC); the model takes ` +
        config.inputs.map((each) => `${each.name} ${each.datatype} [${each.shape.join(', ')}]`).join(', '),
    );
  }
  const layout = config.image_classifier?.layout ?? 'NCHW';
  const [, a, b, c] = input.shape as [number, number, number, number];
  const fixed = layout === 'NCHW' ? [a, b, c] : [c, a, b];
  if (fixed.some((dim) => dim < 1)) {
    throw new HandlerInvalidError(
      `the image-classifier handler needs fixed channels, height and width to resize images into, and input ` +
        `"${input.name}" is [${input.shape.join(', ')}] (${layout}): give them in model-config.yaml, e.g. ` +
        `inputs: [{ name: ${input.name}, datatype: FP32, shape: [-1, ${layout === 'NCHW' ? '3, 224, 224' : '224, 224, 3'}] }]`,
    );
  }
}
