import { imageToRow, type RgbaImage } from '../../../src/handlers/image.js';

/**
 * PaddleOCR's DB detector preprocessing (tools/infer/predict_det.py, DetResizeForTest and
 * NormalizeImage): the long side limited to 960, each side rounded to a multiple of 32 (the
 * network downsamples by 32), ImageNet mean and std on pixels / 255. PaddleOCR reads images
 * with OpenCV, so the tensor's channels are B, G, R and the mean and std lists apply to them
 * in that order.
 */
export const DETECTOR_LIMIT_SIDE = 960;
const SIDE_MULTIPLE = 32;
// imageToRow reads the resize, channel order, layout, mean and std; top_k and softmax are the
// image classifier's and unused here.
const NORMALISATION: Parameters<typeof imageToRow>[2] = {
  resize: 'stretch',
  channel_order: 'BGR',
  layout: 'NCHW',
  mean: [0.485, 0.456, 0.406],
  std: [0.229, 0.224, 0.225],
  top_k: 1,
  softmax: 'never',
};

/** One image's detector input: an NCHW FP32 tensor of one row, at the size detectorSize gives. */
export interface DetectorInput {
  readonly data: Float32Array;
  readonly dims: readonly [1, 3, number, number];
}

/** The size the detector sees an image at: never enlarged, long side at most `limitSide`. */
export function detectorSize(width: number, height: number, limitSide = DETECTOR_LIMIT_SIDE) {
  const ratio = Math.max(width, height) > limitSide ? limitSide / Math.max(width, height) : 1;
  const toMultiple = (side: number): number =>
    Math.max(SIDE_MULTIPLE, Math.round(Math.trunc(side * ratio) / SIDE_MULTIPLE) * SIDE_MULTIPLE);
  return { width: toMultiple(width), height: toMultiple(height) };
}

export function detectorInput(image: RgbaImage, limitSide = DETECTOR_LIMIT_SIDE): DetectorInput {
  const { width, height } = detectorSize(image.width, image.height, limitSide);
  const data = imageToRow(image, { width, height, channels: 3 }, NORMALISATION);
  return { data, dims: [1, 3, height, width] };
}
