import { imageToRow, type RgbaImage } from '../../../src/handlers/image.js';

/**
 * The line models' input (PaddleOCR tools/infer/predict_cls.py and predict_rec.py,
 * resize_norm_img): each line resized to 48 pixels high keeping its aspect ratio (squeezed
 * only if wider than the batch), pixels mapped to (x / 255 − 0.5) / 0.5, zeros to the right.
 * Channels are B, G, R as OpenCV reads them. The classifier takes a fixed 192 wide
 * (cls_image_shape 3,48,192); the recogniser any width, at least 320 (rec_image_shape
 * 3,48,320).
 */
export const LINE_HEIGHT = 48;
export const CLASSIFIER_WIDTH = 192;
export const RECOGNIZER_MIN_WIDTH = 320;
/** Bounds the tensor one very long line can make; PaddleOCR itself has no cap. */
export const RECOGNIZER_MAX_WIDTH = 1600;

const NORMALISATION: Parameters<typeof imageToRow>[2] = {
  resize: 'stretch',
  channel_order: 'BGR',
  layout: 'NCHW',
  mean: [0.5, 0.5, 0.5],
  std: [0.5, 0.5, 0.5],
  top_k: 1,
  softmax: 'never',
};

/** A batch of lines: NCHW FP32, one row a line. */
export interface LineBatch {
  readonly data: Float32Array;
  readonly dims: readonly [number, 3, number, number];
}

/** How wide a line is at the models' height, before any squeezing. */
export const widthAtLineHeight = (line: RgbaImage): number => Math.ceil((LINE_HEIGHT * line.width) / line.height);

/** The recogniser batch width for these lines: the widest line's, within the bounds above. */
export function recognizerWidth(lines: readonly RgbaImage[], maxWidth = RECOGNIZER_MAX_WIDTH): number {
  return Math.min(maxWidth, Math.max(RECOGNIZER_MIN_WIDTH, ...lines.map(widthAtLineHeight)));
}

export function lineBatch(lines: readonly RgbaImage[], width: number): LineBatch {
  const plane = LINE_HEIGHT * width;
  const data = new Float32Array(lines.length * 3 * plane);
  lines.forEach((line, n) => {
    const resized = Math.min(width, widthAtLineHeight(line));
    const row = imageToRow(line, { height: LINE_HEIGHT, width: resized, channels: 3 }, NORMALISATION);
    for (let c = 0; c < 3; c++) {
      for (let y = 0; y < LINE_HEIGHT; y++) {
        const from = (c * LINE_HEIGHT + y) * resized;
        data.set(row.subarray(from, from + resized), (n * 3 + c) * plane + y * width);
      }
    }
  });
  return { data, dims: [lines.length, 3, LINE_HEIGHT, width] };
}
