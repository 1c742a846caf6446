import { spawnSync } from 'node:child_process';
import { cpus } from 'node:os';
import ort from 'onnxruntime-node';
import { BATCHSERVE_VERSION } from '../version.js';
import { queryGpus, type GpuReading } from './nvidia-smi.js';
import { probeDevice, probeDevicesApart } from './provider-probe.js';

export interface ProviderCheck {
  readonly name: string;
  /** The config device that selects it. */
  readonly device: string;
  readonly bundled: boolean;
  readonly works: boolean;
  readonly error?: string;
}

export interface DoctorReport {
  readonly batchserve: string;
  readonly node: string;
  readonly onnxruntime: string;
  readonly platform: string;
  readonly cpu: { readonly cores: number; readonly model: string };
  readonly providers: readonly ProviderCheck[];
  /** Each GPU's utilisation, memory and power from nvidia-smi, or why there are none. */
  readonly gpus: GpuReading;
  /** From vulkaninfo, when it is installed. */
  readonly vulkanAdapters: readonly string[] | undefined;
}

const DEVICE_OF: Record<string, string> = { cpu: 'cpu', webgpu: 'webgpu', cuda: 'cuda:0', tensorrt: 'tensorrt:0' };

/**
 * What this machine can run: every execution provider onnxruntime-node knows, each tried by
 * opening a real session (the demo model) rather than guessed from the platform. The CPU is
 * tried here; accelerators in a child process, whose stderr (native warnings such as Dawn's
 * "Couldn't load Vulkan") becomes part of their reason instead of reaching the terminal.
 */
export async function examineMachine(options: { nvidiaSmi?: string } = {}): Promise<DoctorReport> {
  const backends = ort.listSupportedBackends().map((backend) => ({
    ...backend,
    device: DEVICE_OF[backend.name] ?? backend.name,
  }));
  const accelerators = backends.filter((backend) => backend.device !== 'cpu').map((backend) => backend.device);
  const [cpuResult, acceleratorResults, gpus] = await Promise.all([
    probeDevice('cpu'),
    probeDevicesApart(accelerators),
    queryGpus(options.nvidiaSmi),
  ]);
  const results = new Map([cpuResult, ...acceleratorResults].map((result) => [result.device, result]));
  const providers = backends.map((backend): ProviderCheck => {
    const result = results.get(backend.device);
    return {
      name: backend.name,
      device: backend.device,
      bundled: backend.bundled,
      works: result?.works ?? false,
      ...(result?.error !== undefined ? { error: result.error } : {}),
    };
  });
  return {
    batchserve: BATCHSERVE_VERSION,
    node: process.version,
    onnxruntime: ort.env.versions.common,
    platform: `${process.platform}-${process.arch}`,
    cpu: { cores: cpus().length, model: cpus()[0]?.model ?? 'unknown' },
    providers,
    gpus,
    vulkanAdapters: toolLines('vulkaninfo', ['--summary'])
      ?.filter((line) => /deviceName/.test(line))
      .map((line) => line.split('=').at(-1)?.trim() ?? line),
  };
}

/** A tool's output lines, or undefined when it is not installed or fails. */
function toolLines(command: string, args: string[]): string[] | undefined {
  const result = spawnSync(command, args, { encoding: 'utf8', timeout: 10_000 });
  if (result.error || result.status !== 0) return undefined;
  return result.stdout
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean);
}
