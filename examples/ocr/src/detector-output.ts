import { cornersOf, insideQuad, minAreaRectangle, unclip, type Point, type Quad } from './geometry.js';
import { connectedRegions, type ProbabilityMap } from './regions.js';

/**
 * PaddleOCR's DBPostProcess defaults for its detection models (doc/doc_en/inference_args_en.md,
 * ppocr/postprocess/db_postprocess.py): pixels above `threshold` are text; a region's box is
 * kept when the mean probability inside it reaches `boxThreshold`; boxes grow by
 * `unclipRatio`; boxes whose short side is under 3 pixels (5 after growing) are noise.
 */
export interface BoxOptions {
  readonly threshold: number;
  readonly boxThreshold: number;
  readonly unclipRatio: number;
  readonly maxCandidates: number;
}

export const DB_DEFAULTS: BoxOptions = { threshold: 0.3, boxThreshold: 0.6, unclipRatio: 1.5, maxCandidates: 1000 };
const MIN_SIDE = 3;
const MIN_SIDE_UNCLIPPED = MIN_SIDE + 2;
/** Boxes not wider or higher than this in the original image are dropped (predict_det.py). */
const MIN_SIDE_IN_IMAGE = 3;
/** Boxes whose tops differ by less than this many pixels are on one line of reading order. */
const SAME_ROW_PIXELS = 10;

/** A detected text line: its corners in the original image, in reading order, and its score. */
export interface TextBox {
  readonly box: Quad;
  readonly score: number;
}

/**
 * The text boxes of one image from the detector's probability map (the map is the size of
 * the detector's input), mapped back to the original `imageWidth × imageHeight` and in
 * reading order.
 */
export function boxesFromProbabilityMap(
  map: ProbabilityMap,
  imageWidth: number,
  imageHeight: number,
  options: BoxOptions = DB_DEFAULTS,
): TextBox[] {
  const boxes: TextBox[] = [];
  for (const region of connectedRegions(map, options.threshold, options.maxCandidates)) {
    const rect = minAreaRectangle(region.outline);
    if (Math.min(rect.width, rect.height) < MIN_SIDE) continue;
    const score = meanInside(map, cornersOf(rect));
    if (score < options.boxThreshold) continue;
    const grown = unclip(rect, options.unclipRatio);
    if (Math.min(grown.width, grown.height) < MIN_SIDE_UNCLIPPED) continue;
    const box = toImage(cornersOf(grown), map, imageWidth, imageHeight);
    if (sideLengths(box).some((side) => side <= MIN_SIDE_IN_IMAGE)) continue;
    boxes.push({ box, score });
  }
  return inReadingOrder(boxes);
}

/** The mean probability over the pixels whose centres lie in the quadrilateral. */
function meanInside(map: ProbabilityMap, quad: Quad): number {
  const xs = quad.map((p) => p[0]);
  const ys = quad.map((p) => p[1]);
  const clamp = (value: number, max: number): number => Math.min(max, Math.max(0, value));
  const left = clamp(Math.floor(Math.min(...xs)), map.width - 1);
  const right = clamp(Math.ceil(Math.max(...xs)), map.width - 1);
  const top = clamp(Math.floor(Math.min(...ys)), map.height - 1);
  const bottom = clamp(Math.ceil(Math.max(...ys)), map.height - 1);
  let sum = 0;
  let count = 0;
  for (let y = top; y <= bottom; y++) {
    for (let x = left; x <= right; x++) {
      if (!insideQuad(quad, [x, y])) continue;
      sum += map.data[y * map.width + x] as number;
      count++;
    }
  }
  return count === 0 ? 0 : sum / count;
}

function toImage(quad: Quad, map: ProbabilityMap, imageWidth: number, imageHeight: number): Quad {
  const scale = (p: Point): Point => [
    Math.min(imageWidth - 1, Math.max(0, Math.round((p[0] / map.width) * imageWidth))),
    Math.min(imageHeight - 1, Math.max(0, Math.round((p[1] / map.height) * imageHeight))),
  ];
  return [scale(quad[0]), scale(quad[1]), scale(quad[2]), scale(quad[3])];
}

const sideLengths = (box: Quad): [number, number] => [
  Math.trunc(Math.hypot(box[1][0] - box[0][0], box[1][1] - box[0][1])),
  Math.trunc(Math.hypot(box[3][0] - box[0][0], box[3][1] - box[0][1])),
];

/**
 * Top to bottom by the top-left corner, then left to right among boxes whose tops are within
 * a few pixels of each other: one pass of neighbour swaps after the sort, as PaddleOCR's
 * sorted_boxes does, since "same row" is not transitive and cannot be a sort comparator.
 */
export function inReadingOrder<T extends { readonly box: Quad }>(boxes: readonly T[]): T[] {
  const ordered = [...boxes].sort((a, b) => a.box[0][1] - b.box[0][1] || a.box[0][0] - b.box[0][0]);
  for (let i = 0; i < ordered.length - 1; i++) {
    for (let j = i; j >= 0; j--) {
      const current = ordered[j]!;
      const next = ordered[j + 1]!;
      if (Math.abs(next.box[0][1] - current.box[0][1]) >= SAME_ROW_PIXELS || next.box[0][0] >= current.box[0][0]) break;
      ordered[j] = next;
      ordered[j + 1] = current;
    }
  }
  return ordered;
}
