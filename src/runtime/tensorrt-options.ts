import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import type { TensorrtOptions } from '../config/model-config.js';

/**
 * onnxruntime-node passes TensorRT only a device id, so its FP16 and engine-cache options
 * travel the way the TensorRT provider reads them when no options struct is given: the
 * ORT_TENSORRT_* environment variables, read as each session is created.
 */
export function tensorrtEnvironment(options: TensorrtOptions): Record<string, string> {
  const cacheDir =
    options.cache_dir ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'batchserve', 'tensorrt');
  return {
    ORT_TENSORRT_FP16_ENABLE: options.fp16 ? '1' : '0',
    ORT_TENSORRT_ENGINE_CACHE_ENABLE: options.engine_cache ? '1' : '0',
    ...(options.engine_cache ? { ORT_TENSORRT_CACHE_PATH: resolve(cacheDir) } : {}),
  };
}

/**
 * Sets a model's TensorRT options before one of its instances opens. Only the main thread
 * can do it: a worker's process.env is a copy that native code never sees. The variables are
 * process-wide, so instances open one at a time (as loading does) to keep each model's own.
 */
export function applyTensorrtOptions(device: string, options: TensorrtOptions): void {
  if (!device.startsWith('tensorrt')) return;
  Object.assign(process.env, tensorrtEnvironment(options));
}
