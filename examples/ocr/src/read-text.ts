import ort from 'onnxruntime-node';
import { decodeImage } from '../../../src/handlers/image.js';
import { DROP_SCORE, decodeCtc } from './ctc.js';
import { detectorInput } from './detector-input.js';
import { boxesFromProbabilityMap } from './detector-output.js';
import type { Quad } from './geometry.js';
import { cropLine, rotateHalfTurn } from './line-crop.js';
import { CLASSIFIER_WIDTH, lineBatch, recognizerWidth } from './line-input.js';
import type { OcrSessions } from './models.js';
import { isUpsideDown, orientationsOf, type Angle } from './orientation.js';

export interface TextLine {
  readonly text: string;
  /** Mean probability of the recognised characters. */
  readonly confidence: number;
  /** Corners in the image, top-left first, clockwise. */
  readonly box: Quad;
  /** 180 when the line was read upside down and turned before recognition. */
  readonly orientation: Angle;
}

/**
 * Reads the text in one PNG or JPEG image with the three models, in process, one image at a
 * time: detect, crop each line, classify its orientation and turn it if upside down,
 * recognise. Lines come in reading order. The same stages serve a pipeline's steps; this is
 * their plain composition, for tests and as the in-process baseline.
 */
export async function readText(imageBytes: Buffer, sessions: OcrSessions): Promise<TextLine[]> {
  const image = decodeImage(imageBytes);
  const detection = detectorInput(image);
  const map = await runModel(sessions.detector, detection);
  const [, , mapHeight = 0, mapWidth = 0] = map.dims;
  const boxes = boxesFromProbabilityMap(
    { width: mapWidth, height: mapHeight, data: map.data as Float32Array },
    image.width,
    image.height,
  );
  if (boxes.length === 0) return [];

  const crops = boxes.map(({ box }) => cropLine(image, box));
  const classified = await runModel(sessions.classifier, lineBatch(crops, CLASSIFIER_WIDTH));
  const orientations = orientationsOf(classified.data as Float32Array, crops.length);
  const upsideDown = orientations.map((orientation) => isUpsideDown(orientation));
  const lines = crops.map((crop, i) => (upsideDown[i] ? rotateHalfTurn(crop) : crop));

  const recognised = await runModel(sessions.recognizer, lineBatch(lines, recognizerWidth(lines)));
  const texts = decodeCtc(recognised.data as Float32Array, recognised.dims, sessions.classes);
  return texts.flatMap(({ text, confidence }, i) =>
    confidence < DROP_SCORE
      ? []
      : [{ text, confidence, box: boxes[i]!.box, orientation: upsideDown[i] ? (180 as const) : (0 as const) }],
  );
}

/** A model input this module builds: detector images and line batches alike. */
interface ModelInput {
  readonly data: Float32Array;
  readonly dims: readonly number[];
}

async function runModel(session: ort.InferenceSession, input: ModelInput): Promise<ort.Tensor> {
  const feeds = { [session.inputNames[0]!]: new ort.Tensor('float32', input.data, input.dims) };
  const outputs = await session.run(feeds);
  return outputs[session.outputNames[0]!]!;
}
