import type { RgbaImage } from '../../../src/handlers/image.js';
import { distance, type Quad } from './geometry.js';

/**
 * Lines at least this much taller than wide are vertical text; PaddleOCR's
 * get_rotate_crop_image turns them a quarter turn so they read along the width.
 */
const VERTICAL_RATIO = 1.5;

/**
 * Cuts a detected line out of the image as an upright, axis-aligned picture: each output
 * pixel is sampled (bilinear, edges repeated) from where it falls between the box's corners,
 * so a rotated box comes out straight. The output is as wide as the box's longer horizontal
 * side and as high as its longer vertical side.
 */
export function cropLine(image: RgbaImage, box: Quad): RgbaImage {
  const [topLeft, topRight, bottomRight, bottomLeft] = box;
  const width = Math.max(1, Math.trunc(Math.max(distance(topLeft, topRight), distance(bottomLeft, bottomRight))));
  const height = Math.max(1, Math.trunc(Math.max(distance(topLeft, bottomLeft), distance(topRight, bottomRight))));
  const data = new Uint8Array(width * height * 4);
  for (let v = 0; v < height; v++) {
    const t = v / height;
    for (let u = 0; u < width; u++) {
      const s = u / width;
      const topX = topLeft[0] + (topRight[0] - topLeft[0]) * s;
      const topY = topLeft[1] + (topRight[1] - topLeft[1]) * s;
      const bottomX = bottomLeft[0] + (bottomRight[0] - bottomLeft[0]) * s;
      const bottomY = bottomLeft[1] + (bottomRight[1] - bottomLeft[1]) * s;
      const x = topX + (bottomX - topX) * t;
      const y = topY + (bottomY - topY) * t;
      sampleInto(image, x, y, data, (v * width + u) * 4);
    }
  }
  const line = { width, height, data };
  return height / width >= VERTICAL_RATIO ? rotateQuarterCounterClockwise(line) : line;
}

function sampleInto(image: RgbaImage, x: number, y: number, out: Uint8Array, at: number): void {
  const cx = Math.min(image.width - 1, Math.max(0, x));
  const cy = Math.min(image.height - 1, Math.max(0, y));
  const x0 = Math.floor(cx);
  const y0 = Math.floor(cy);
  const x1 = Math.min(image.width - 1, x0 + 1);
  const y1 = Math.min(image.height - 1, y0 + 1);
  const fx = cx - x0;
  const fy = cy - y0;
  for (let c = 0; c < 4; c++) {
    const pixel = (px: number, py: number): number => image.data[(py * image.width + px) * 4 + c] as number;
    const upper = pixel(x0, y0) * (1 - fx) + pixel(x1, y0) * fx;
    const lower = pixel(x0, y1) * (1 - fx) + pixel(x1, y1) * fx;
    out[at + c] = Math.round(upper * (1 - fy) + lower * fy);
  }
}

/** The image turned half a turn: what a line the orientation classifier reads as 180° needs. */
export function rotateHalfTurn(image: RgbaImage): RgbaImage {
  const pixels = image.width * image.height;
  const data = new Uint8Array(pixels * 4);
  for (let i = 0; i < pixels; i++) data.set(image.data.subarray(i * 4, i * 4 + 4), (pixels - 1 - i) * 4);
  return { width: image.width, height: image.height, data };
}

function rotateQuarterCounterClockwise(image: RgbaImage): RgbaImage {
  const { width, height } = image;
  const data = new Uint8Array(width * height * 4);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      // Source (x, y) lands at column y, row (width - 1 - x) of the height-wide result.
      const to = ((width - 1 - x) * height + y) * 4;
      data.set(image.data.subarray((y * width + x) * 4, (y * width + x) * 4 + 4), to);
    }
  }
  return { width: height, height: width, data };
}
