import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type ort from 'onnxruntime-node';
import { InferenceInputError } from '../../../src/core/errors.js';
import { decodeImage, type RgbaImage } from '../../../src/handlers/image.js';
import { DROP_SCORE, characterClasses, decodeCtc } from '../src/ctc.js';
import { detectorInput, detectorSize } from '../src/detector-input.js';
import { boxesFromProbabilityMap } from '../src/detector-output.js';
import type { Point, Quad } from '../src/geometry.js';
import { cropLine, rotateHalfTurn } from '../src/line-crop.js';
import { CLASSIFIER_WIDTH, lineBatch, recognizerWidth } from '../src/line-input.js';
import { isUpsideDown, orientationsOf } from '../src/orientation.js';

/**
 * The OCR pipeline's function steps (ocr.model-config.yaml beside this file wires them between
 * the three models). Each gets one tensor map per pipeline request of a batch and returns one
 * map, or an Error that fails only that request. Each is pure: everything a later step needs
 * travels as a tensor, so requests never share state.
 *
 * Pipeline tensors, one request (N = its text lines):
 *   image       BYTES [1]                  the PNG or JPEG
 *   det_x       FP32  [1, 3, h, w]         detector input (h, w from detectorSize)
 *   pixels      UINT8 [1, H, W, 4]         the decoded image, so no later step decodes again
 *   det_prob    FP32  [1, 1, h', w']       probability map; h' ≥ h, w' ≥ w when padded
 *   cls_x       FP32  [N, 3, 48, 192]      classifier input
 *   line_boxes  FP32  [N, 8]               corners x0 y0 … x3 y3 in the image
 *   line_crops  UINT8 [N, Hc, Wc, 4]       each line upright, top-left aligned, zeros after
 *   line_sizes  INT32 [N, 2]               each crop's width and height inside line_crops
 *   cls_prob    FP32  [N, 2]               softmax over 0° and 180°
 *   rec_x       FP32  [N, 3, 48, Wr]       recogniser input (lines turned where upside down)
 *   line_angles FP32  [N]                  0 or 180
 *   rec_prob    FP32  [N, Wr / 8, 6625]    softmax per step
 *   lines       BYTES [K]                  one JSON {text, confidence, box, orientation} a line
 *
 * This file is bundled with its imports into one ESM file for the archive
 * (pack.ts beside it), so onnxruntime is imported for its types only; tensors are built
 * with the constructor the server hands over in the context.
 */

type Tensor = ort.Tensor;
type TensorMap = Record<string, Tensor>;

/** What a function step is given besides its requests (the parts these steps use). */
export interface OcrStepContext {
  /** The extracted archive: ppocr_keys_v1.txt lies here. */
  readonly dir: string;
  readonly Tensor: typeof ort.Tensor;
}

export type StepResult = TensorMap | Error;

export const CHARACTER_LIST_FILE = 'ppocr_keys_v1.txt';

/** The recogniser's classes, read once at load from the archive's character list. */
let classes: readonly string[] | undefined;

export async function initialize(context: OcrStepContext): Promise<void> {
  classes = characterClasses(await readFile(join(context.dir, CHARACTER_LIST_FILE), 'utf8'));
}

/** Runs `step` on each request alone, so a bad image fails only its own request. */
const perRequest =
  (step: (request: TensorMap, context: OcrStepContext) => TensorMap) =>
  (requests: readonly TensorMap[], context: OcrStepContext): StepResult[] =>
    requests.map((request) => {
      try {
        return step(request, context);
      } catch (error) {
        // The server tells the client's mistakes by `status` 400: this bundle's copy of
        // InferenceInputError is not the server's class.
        if (error instanceof InferenceInputError) return Object.assign(error, { status: 400 });
        return error instanceof Error ? error : new Error(String(error));
      }
    });

function required(request: TensorMap, name: string): Tensor {
  const tensor = request[name];
  if (!tensor) throw new TypeError(`the step needs a tensor named "${name}"`);
  return tensor;
}

/**
 * The bytes of a BYTES tensor's one element. Tensors decoded from the wire may hold raw bytes
 * (Uint8Array, Buffer) or strings; a string is taken as binary, one char a byte.
 */
export function imageBytesOf(tensor: Tensor): Buffer {
  const elements = tensor.data as readonly unknown[];
  if (elements.length !== 1) {
    throw new InferenceInputError(`each request carries one image, got ${elements.length} elements`);
  }
  const element = elements[0];
  if (element instanceof Uint8Array) return Buffer.from(element.buffer, element.byteOffset, element.byteLength);
  if (typeof element === 'string') return Buffer.from(element, 'latin1');
  throw new InferenceInputError('the image must be BYTES');
}

const imageOf = (pixels: Tensor): RgbaImage => {
  const [, height = 0, width = 0] = pixels.dims;
  return { width, height, data: pixels.data as Uint8Array };
};

/** Step 1: decode the image; the detector's input, and the pixels for cropping later. */
export const prepareDetector = perRequest((request, { Tensor }) => {
  const image = decodeImage(imageBytesOf(required(request, 'image')));
  const detection = detectorInput(image);
  return {
    x: new Tensor('float32', detection.data, detection.dims),
    // pngjs gives a Buffer; the tensor wants a plain Uint8Array view of the same bytes.
    pixels: new Tensor('uint8', new Uint8Array(image.data.buffer, image.data.byteOffset, image.data.byteLength), [
      1,
      image.height,
      image.width,
      4,
    ]),
  };
});

/**
 * Step 2: text boxes from the probability map, each line cropped upright, and the
 * classifier's input. The map may be wider or taller than the detector input when the
 * detector step pads requests to a shared size; only its top-left part is this image's.
 */
export const cropLines = perRequest((request, { Tensor }) => {
  const pixels = required(request, 'pixels');
  const image = imageOf(pixels);
  const probability = required(request, 'probability');
  const size = detectorSize(image.width, image.height);
  const map = topLeft(probability.data as Float32Array, probability.dims, size.width, size.height);
  const boxes = boxesFromProbabilityMap(map, image.width, image.height).map(({ box }) => box);
  const crops = boxes.map((box) => cropLine(image, box));
  const classifier = lineBatch(crops, CLASSIFIER_WIDTH);
  return {
    x: new Tensor('float32', classifier.data, classifier.dims),
    boxes: new Tensor('float32', Float32Array.from(boxes.flat(2)), [boxes.length, 8]),
    ...packCrops(crops, Tensor),
  };
});

function topLeft(data: Float32Array, dims: readonly number[], width: number, height: number) {
  const [, , mapHeight = 0, mapWidth = 0] = dims;
  if (mapHeight < height || mapWidth < width) {
    throw new RangeError(`the probability map is ${mapWidth}×${mapHeight}, smaller than the input ${width}×${height}`);
  }
  if (mapWidth === width && mapHeight === height) return { width, height, data };
  const region = new Float32Array(width * height);
  for (let y = 0; y < height; y++) region.set(data.subarray(y * mapWidth, y * mapWidth + width), y * width);
  return { width, height, data: region };
}

/** Lines of different sizes in one tensor: each at the top left of a slot as big as the largest. */
function packCrops(crops: readonly RgbaImage[], Tensor: typeof ort.Tensor): { crops: Tensor; sizes: Tensor } {
  const slotWidth = Math.max(0, ...crops.map((crop) => crop.width));
  const slotHeight = Math.max(0, ...crops.map((crop) => crop.height));
  const data = new Uint8Array(crops.length * slotHeight * slotWidth * 4);
  const sizes = new Int32Array(crops.length * 2);
  crops.forEach((crop, n) => {
    const slot = n * slotHeight * slotWidth * 4;
    for (let y = 0; y < crop.height; y++) {
      data.set(crop.data.subarray(y * crop.width * 4, (y + 1) * crop.width * 4), slot + y * slotWidth * 4);
    }
    sizes.set([crop.width, crop.height], n * 2);
  });
  return {
    crops: new Tensor('uint8', data, [crops.length, slotHeight, slotWidth, 4]),
    sizes: new Tensor('int32', sizes, [crops.length, 2]),
  };
}

function unpackCrops(crops: Tensor, sizes: Tensor): RgbaImage[] {
  const [lines = 0, slotHeight = 0, slotWidth = 0] = crops.dims;
  const data = crops.data as Uint8Array;
  const extent = sizes.data as Int32Array;
  return Array.from({ length: lines }, (_, n) => {
    const width = extent[n * 2] as number;
    const height = extent[n * 2 + 1] as number;
    const pixels = new Uint8Array(width * height * 4);
    const slot = n * slotHeight * slotWidth * 4;
    for (let y = 0; y < height; y++) {
      pixels.set(data.subarray(slot + y * slotWidth * 4, slot + (y * slotWidth + width) * 4), y * width * 4);
    }
    return { width, height, data: pixels };
  });
}

/** Step 3: each line turned half a turn where the classifier reads it upside down; the recogniser's input. */
export const orientLines = perRequest((request, { Tensor }) => {
  const crops = unpackCrops(required(request, 'crops'), required(request, 'sizes'));
  // With no lines the classifier had nothing to run on, and there may be no answer to read.
  const classified =
    crops.length === 0 ? [] : orientationsOf(required(request, 'probabilities').data as Float32Array, crops.length);
  const upsideDown = classified.map((orientation) => isUpsideDown(orientation));
  const lines = crops.map((crop, n) => (upsideDown[n] ? rotateHalfTurn(crop) : crop));
  const recognizer = lineBatch(lines, recognizerWidth(lines));
  return {
    x: new Tensor('float32', recognizer.data, recognizer.dims),
    angles: new Tensor(
      'float32',
      Float32Array.from(upsideDown, (turned) => (turned ? 180 : 0)),
      [lines.length],
    ),
  };
});

/** Step 4: CTC decoding; lines read with confidence under 0.5 are dropped (PaddleOCR's drop_score). */
export const decodeLines = perRequest((request, { Tensor }) => {
  if (!classes) throw new Error('initialize() has not read the character list');
  const boxes = required(request, 'boxes');
  const angles = required(request, 'angles').data as Float32Array;
  const lineCount = boxes.dims[0] ?? 0;
  const probabilities = lineCount === 0 ? undefined : required(request, 'probabilities');
  const texts = probabilities ? decodeCtc(probabilities.data as Float32Array, probabilities.dims, classes) : [];
  const corners = boxes.data as Float32Array;
  const lines = texts.flatMap(({ text, confidence }, n) => {
    if (confidence < DROP_SCORE) return [];
    const point = (corner: number): Point => [
      corners[n * 8 + corner * 2] as number,
      corners[n * 8 + corner * 2 + 1] as number,
    ];
    const box: Quad = [point(0), point(1), point(2), point(3)];
    return [JSON.stringify({ text, confidence, box, orientation: angles[n] })];
  });
  return { lines: new Tensor('string', lines, [lines.length]) };
});
