/**
 * The orientation classifier's answer for each line (PaddleOCR's ClsPostProcess with
 * label_list ['0', '180']): the likelier class and its probability. A line counts as upside
 * down only when 180° wins with a probability above cls_thresh 0.9, so a hesitant answer
 * leaves the line as it is.
 */
export type Angle = 0 | 180;

export interface Orientation {
  readonly angle: Angle;
  readonly score: number;
}

const LABELS: readonly Angle[] = [0, 180];
export const CLASSIFIER_THRESHOLD = 0.9;

/** Reads the classifier's [N, 2] softmax output, one orientation a line. */
export function orientationsOf(probabilities: Float32Array, lines: number): Orientation[] {
  return Array.from({ length: lines }, (_, n) => {
    const upright = probabilities[n * LABELS.length] as number;
    const flipped = probabilities[n * LABELS.length + 1] as number;
    return flipped > upright ? { angle: LABELS[1]!, score: flipped } : { angle: LABELS[0]!, score: upright };
  });
}

/** Whether a line must be turned half a turn before recognition. */
export const isUpsideDown = (orientation: Orientation, threshold = CLASSIFIER_THRESHOLD): boolean =>
  orientation.angle === 180 && orientation.score > threshold;
