import { examineMachine } from '../runtime/doctor.js';
import { ModelLoadError } from '../core/errors.js';
import { createTable } from '../core/table.js';

/** Prints what this machine can run; fails only when not even the CPU provider works. */
export async function runDoctor(options: { json: boolean }): Promise<void> {
  const report = await examineMachine();
  if (options.json) {
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } else {
    const lines = [
      `batchserve ${report.batchserve}, node ${report.node}, onnxruntime-node ${report.onnxruntime}, ${report.platform}`,
      `cpu: ${report.cpu.cores} cores, ${report.cpu.model}`,
      `gpus (nvidia-smi): ${report.gpus ? report.gpus.join('; ') || 'none' : 'nvidia-smi not found'}`,
      `vulkan adapters (vulkaninfo): ${report.vulkanAdapters ? report.vulkanAdapters.join('; ') || 'none' : 'vulkaninfo not found'}`,
    ];
    const table = createTable(['provider', 'device', 'bundled', 'works', 'why not']);
    for (const provider of report.providers) {
      table.push([
        provider.name,
        provider.device,
        provider.bundled ? 'yes' : 'no',
        provider.works ? 'yes' : 'no',
        provider.error ?? '',
      ]);
    }
    process.stdout.write(`${lines.join('\n')}\n${table.toString()}\n`);
  }
  if (!report.providers.some((provider) => provider.name === 'cpu' && provider.works)) {
    throw new ModelLoadError('the CPU execution provider does not work: onnxruntime-node is not installed correctly');
  }
}
