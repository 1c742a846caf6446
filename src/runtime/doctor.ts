import { spawnSync } from 'node:child_process';
import { cpus } from 'node:os';
import ort from 'onnxruntime-node';
import { BATCHSERVE_VERSION } from '../version.js';
import { DEMO_MODEL_PATH } from './demo-model.js';
import { createSession } from './session.js';

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
  /** From nvidia-smi, when it is installed. */
  readonly gpus: readonly string[] | undefined;
  /** From vulkaninfo, when it is installed. */
  readonly vulkanAdapters: readonly string[] | undefined;
}

const DEVICE_OF: Record<string, string> = { cpu: 'cpu', webgpu: 'webgpu', cuda: 'cuda:0', tensorrt: 'tensorrt:0' };

/**
 * What this machine can run: every execution provider onnxruntime-node knows, each tried by
 * opening a real session (the demo model) rather than guessed from the platform.
 */
export async function examineMachine(): Promise<DoctorReport> {
  const providers: ProviderCheck[] = [];
  for (const backend of ort.listSupportedBackends()) {
    const device = DEVICE_OF[backend.name] ?? backend.name;
    try {
      const session = await createSession(
        DEMO_MODEL_PATH,
        { runtime: { intra_op_threads: 1, inter_op_threads: 1, graph_optimization_level: 'basic' }, device },
        'the demo model',
      );
      await session.release();
      providers.push({ name: backend.name, device, bundled: backend.bundled, works: true });
    } catch (error) {
      providers.push({
        name: backend.name,
        device,
        bundled: backend.bundled,
        works: false,
        error: (error as Error).message,
      });
    }
  }
  return {
    batchserve: BATCHSERVE_VERSION,
    node: process.version,
    onnxruntime: ort.env.versions.common,
    platform: `${process.platform}-${process.arch}`,
    cpu: { cores: cpus().length, model: cpus()[0]?.model ?? 'unknown' },
    providers,
    gpus: toolLines('nvidia-smi', ['--query-gpu=index,name,memory.total,driver_version', '--format=csv,noheader']),
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
