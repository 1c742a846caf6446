import ort from 'onnxruntime-node';

/**
 * The level `pack --optimize` saves the graph at. `extended` adds fusions (Conv+activation,
 * GELU, MatMul+scale…) on top of `basic`'s constant folding; `all` would also bake in the CPU's
 * NCHWc memory layout, which only suits the exact CPU the archive was packed on.
 */
export const SAVED_OPTIMIZATION_LEVEL = 'extended';

/** The onnxruntime that runs here: a saved optimised graph is trusted only by the one that wrote it. */
export function onnxruntimeVersion(): string {
  return ort.env.versions.node ?? ort.env.versions.common;
}

/** Devices that may run a saved optimised graph. */
export const OPTIMIZED_GRAPH_DEVICES: readonly string[] = ['cpu'];

/**
 * Why an optimised graph saved by onnxruntime `recordedVersion` must not run on `device`, or
 * undefined when it may. The graph is optimised for the CPU execution provider: its fused nodes
 * (com.microsoft FusedConv, QuickGelu, FusedMatMul…) have CPU kernels but not always
 * WebGPU, CUDA or TensorRT ones, and `auto` cannot know its device before it tries. Contrib op
 * schemas change between releases, so another onnxruntime version may misread the file.
 */
export function optimizedGraphRefusal(device: string, recordedVersion: string): string | undefined {
  if (!OPTIMIZED_GRAPH_DEVICES.includes(device)) {
    return `the optimised graph is for the cpu device, this instance runs on ${device}`;
  }
  const running = onnxruntimeVersion();
  if (recordedVersion !== running) {
    return `the optimised graph was saved by onnxruntime ${recordedVersion}, this is ${running}`;
  }
  return undefined;
}
