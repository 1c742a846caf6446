import jpeg from 'jpeg-js';
import { PNG } from 'pngjs';
import { InferenceInputError } from '../core/errors.js';
import type { ImageClassifierOptions } from '../config/model-config.js';

export interface RgbaImage {
  readonly width: number;
  readonly height: number;
  /** 4 bytes a pixel, row-major. */
  readonly data: Uint8Array;
}

/** Decoding refuses images beyond this, so one upload cannot exhaust memory. */
const MAX_MEGAPIXELS = 40;

const isPng = (bytes: Buffer): boolean => bytes.length > 8 && bytes.readUInt32BE(0) === 0x89504e47;
const isJpeg = (bytes: Buffer): boolean => bytes.length > 3 && bytes[0] === 0xff && bytes[1] === 0xd8;

export function decodeImage(bytes: Buffer): RgbaImage {
  try {
    if (isPng(bytes)) {
      const png = PNG.sync.read(bytes);
      if (png.width * png.height > MAX_MEGAPIXELS * 1e6) throw new Error(`larger than ${MAX_MEGAPIXELS} megapixels`);
      return png;
    }
    if (isJpeg(bytes)) {
      return jpeg.decode(bytes, { useTArray: true, formatAsRGBA: true, maxResolutionInMP: MAX_MEGAPIXELS });
    }
  } catch (error) {
    throw new InferenceInputError(`cannot decode the image: ${(error as Error).message}`);
  }
  throw new InferenceInputError('the body is not a PNG or JPEG image');
}

export interface ImageGeometry {
  readonly height: number;
  readonly width: number;
  readonly channels: number;
}

/**
 * Resizes (bilinear) and normalizes an image into one row of the model's input:
 * ((pixel / 255) - mean) / std per channel, in the configured layout and channel order.
 * With keep-ratio-pad the image keeps its aspect ratio and the rest stays 0.
 */
export function imageToRow(image: RgbaImage, geometry: ImageGeometry, options: ImageClassifierOptions): Float32Array {
  const { height, width, channels } = geometry;
  const row = new Float32Array(height * width * channels);
  let targetWidth = width;
  let targetHeight = height;
  if (options.resize === 'keep-ratio-pad') {
    const scale = Math.min(width / image.width, height / image.height);
    targetWidth = Math.max(1, Math.min(width, Math.round(image.width * scale)));
    targetHeight = Math.max(1, Math.min(height, Math.round(image.height * scale)));
  }
  const sourceChannel = options.channel_order === 'RGB' ? [0, 1, 2] : [2, 1, 0];
  const scaleX = image.width / targetWidth;
  const scaleY = image.height / targetHeight;
  for (let y = 0; y < targetHeight; y++) {
    const sy = Math.min(image.height - 1, Math.max(0, (y + 0.5) * scaleY - 0.5));
    const y0 = Math.floor(sy);
    const y1 = Math.min(image.height - 1, y0 + 1);
    const fy = sy - y0;
    for (let x = 0; x < targetWidth; x++) {
      const sx = Math.min(image.width - 1, Math.max(0, (x + 0.5) * scaleX - 0.5));
      const x0 = Math.floor(sx);
      const x1 = Math.min(image.width - 1, x0 + 1);
      const fx = sx - x0;
      for (let c = 0; c < channels; c++) {
        const source = sourceChannel[c % 3] as number;
        const at = (px: number, py: number): number => image.data[(py * image.width + px) * 4 + source] as number;
        const top = at(x0, y0) * (1 - fx) + at(x1, y0) * fx;
        const bottom = at(x0, y1) * (1 - fx) + at(x1, y1) * fx;
        const value = (top * (1 - fy) + bottom * fy) / 255;
        const normalized = (value - (options.mean[c] as number)) / (options.std[c] as number);
        const index = options.layout === 'NCHW' ? (c * height + y) * width + x : (y * width + x) * channels + c;
        row[index] = normalized;
      }
    }
  }
  return row;
}
