import type ort from 'onnxruntime-node';

/** How to install or enable each accelerator, for load errors that say how to fix them. */
const FIXES: Record<string, string> = {
  cuda: 'the CUDA execution provider is not bundled with onnxruntime-node; install it with `ONNXRUNTIME_NODE_INSTALL=cuda12 npm ci` (needs CUDA 12 and cuDNN 9 libraries)',
  tensorrt:
    'the TensorRT execution provider is not bundled with onnxruntime-node; install it with `ONNXRUNTIME_NODE_INSTALL=cuda12 npm ci` (needs CUDA 12, cuDNN 9 and TensorRT libraries)',
  webgpu: 'WebGPU needs a Vulkan loader (libvulkan1) and a GPU driver that provides a Vulkan adapter',
};

export interface DeviceChoice {
  readonly device: string;
  readonly providers: ort.InferenceSession.ExecutionProviderConfig[];
}

/** `auto` tries these in order and keeps the first that initializes. */
export const AUTO_ORDER = ['cuda:0', 'webgpu', 'cpu'] as const;

/** onnxruntime execution providers for a config device: cpu, webgpu, cuda[:N], tensorrt[:N]. */
export function providersFor(device: string): DeviceChoice {
  const [kind = 'cpu', index = '0'] = device.split(':');
  const deviceId = Number(index);
  switch (kind) {
    case 'cuda':
      return { device: `cuda:${deviceId}`, providers: [{ name: 'cuda', deviceId }] };
    case 'tensorrt':
      return {
        device: `tensorrt:${deviceId}`,
        providers: [
          { name: 'tensorrt', deviceId },
          { name: 'cuda', deviceId },
        ],
      };
    case 'webgpu':
      return { device: 'webgpu', providers: ['webgpu'] };
    default:
      return { device: 'cpu', providers: ['cpu'] };
  }
}

export function fixFor(device: string): string | undefined {
  return FIXES[device.split(':')[0] ?? ''];
}
