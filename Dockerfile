# syntax=docker/dockerfile:1
#
# batchserve's image: the CLI (node bin/batchserve.js) as ENTRYPOINT, serving /mnt/models (where KServe's storage
# initializer puts a storageUri) on 8080 (v2 inference), 8081 (management), 8082 (metrics)
# and 8001 (v2 / Triton gRPC).
#
#   docker build -t batchserve .                                  # CPU
#   docker build --build-arg VARIANT=cuda -t batchserve:cuda .    # CUDA 12 + cuDNN 9 (also TensorRT's provider)
#   docker run --rm -p 8080:8080 -v "$PWD/model-store:/mnt/models:ro" batchserve
#   docker run --rm batchserve serve --help                       # every flag and its BATCHSERVE_* variable
#
# test/cli/container-image.test.ts runs this file's ENV, ENTRYPOINT and CMD (and KServe's
# args) against real archives, outside a container: keep the two in step.

ARG VARIANT=cpu
ARG NODE_IMAGE=node:20.20-bookworm-slim
ARG CUDA_IMAGE=nvidia/cuda:12.6.3-cudnn-runtime-ubuntu22.04

# --- build: TypeScript → dist/src, with the dev dependencies --------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /opt/batchserve
COPY package.json package-lock.json .npmrc ./
# --ignore-scripts: the package's own `prepare` (tsc) would run before the sources are here;
# `npm run build` below is that step. Nothing here runs a model.
RUN npm ci --ignore-scripts
COPY tsconfig.json ./
COPY src ./src
RUN npm run build

# --- the two bases --------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS base-cpu

FROM ${CUDA_IMAGE} AS base-cuda
# The official Node 20 binary and npm from the same image as the CPU variant (built for
# glibc ≥ 2.28; Ubuntu 22.04 has 2.35).
COPY --from=build /usr/local/bin/node /usr/local/bin/node
COPY --from=build /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/npm
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
 && node --version && npm --version

# --- runtime ----------------------------------------------------------------------------------
FROM base-${VARIANT} AS runtime
ARG VARIANT
WORKDIR /opt/batchserve
COPY package.json package-lock.json .npmrc ./
# Production dependencies only. --ignore-scripts again skips `prepare` (no tsc here); the two
# dependencies with install scripts run theirs: esbuild (tsx's, for .ts handlers) and
# onnxruntime-node, whose CUDA providers are downloaded only for the cuda variant (.npmrc
# says skip; ONNXRUNTIME_NODE_INSTALL wins over it).
RUN npm ci --omit=dev --ignore-scripts \
 && if [ "$VARIANT" = cuda ]; then export ONNXRUNTIME_NODE_INSTALL=cuda12; fi \
 && npm rebuild esbuild onnxruntime-node \
 && npm cache clean --force
COPY --from=build /opt/batchserve/dist/src ./dist/src
COPY bin ./bin
COPY templates ./templates
# Triton's .proto files, which the gRPC server loads at start from the package folder.
COPY protos ./protos
RUN chmod 0755 bin/batchserve.js bin/model-archive.js \
 && ln -s /opt/batchserve/bin/batchserve.js /usr/local/bin/batchserve \
 && ln -s /opt/batchserve/bin/model-archive.js /usr/local/bin/model-archive \
 && groupadd --system --gid 10001 batchserve \
 && useradd --system --uid 10001 --gid 10001 --home-dir /home/batchserve --create-home --shell /usr/sbin/nologin batchserve \
 && mkdir -p /mnt/models

# Every serve flag is also a BATCHSERVE_* variable (flags win). All that is written goes under
# /tmp, so that a read-only root filesystem works with an emptyDir (or tmpfs) there; that
# includes TensorRT's engine cache (XDG_CACHE_HOME).
ENV NODE_ENV=production \
    BATCHSERVE_HOST=0.0.0.0 \
    BATCHSERVE_WORK_DIR=/tmp/batchserve \
    BATCHSERVE_KEY_FILE=/tmp/batchserve.key \
    BATCHSERVE_STATE_FILE=/tmp/batchserve-state.json \
    XDG_CACHE_HOME=/tmp/.cache

USER 10001:10001
WORKDIR /home/batchserve
EXPOSE 8080 8081 8082 8001
# Node with the server's V8 flags (src/core/serving-node-flags.ts), those the bin's shebang
# gives it: pid 1 is the server.
ENTRYPOINT ["node", "--initial-old-space-size=64", "/opt/batchserve/bin/batchserve.js"]
CMD ["serve", "--model-store", "/mnt/models", "--models", "all"]
