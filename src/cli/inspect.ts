import { modelConfigToYaml } from '../config/load.js';
import { openArchive } from '../archive/source.js';
import { readArchiveContents, requireEntry } from '../archive/read.js';
import { readModelSignature } from '../runtime/session.js';
import { createTable } from '../core/table.js';
import { formatBytes, formatShape } from './format.js';
import { accuracyTable, modelVariantLines } from './pack-report.js';

export async function runInspect(location: string, options: { json: boolean }): Promise<void> {
  const source = await openArchive(location);
  try {
    const { manifest, config } = await readArchiveContents(source);
    const modelFile = manifest.model.serializedFile;
    // A pipeline has no graph: its config's tensors are what it serves.
    const model = config.pipeline
      ? { inputs: config.inputs ?? [], outputs: config.outputs ?? [] }
      : await readModelSignature(await requireEntry(source, modelFile), `${location}!${modelFile}`);
    const sizes = new Map(source.entries.map((entry) => [entry.path, entry]));
    if (options.json) {
      process.stdout.write(
        `${JSON.stringify({ location, format: source.format, manifest, config, model }, null, 2)}\n`,
      );
      return;
    }
    const { model: info } = manifest;
    const batching = config.dynamic_batching;
    const lines = [
      `archive    ${location} (${source.format}, format ${manifest.formatVersion}, by batchserve ${manifest.archiverVersion})`,
      `model      ${info.modelName} version ${info.modelVersion}, handler ${info.handler}, created ${manifest.createdOn}`,
      `batching   max_batch_size ${config.max_batch_size ?? '?'}, max_queue_delay ${batching.max_queue_delay === 'auto' ? 'auto' : `${batching.max_queue_delay} µs`}, ` +
        `preferred [${batching.preferred_batch_sizes.join(', ')}], max_queue_size ${batching.max_queue_size}`,
      `instances  ${config.instances.map((group) => `${group.count} × ${group.device}`).join(', ')}`,
      ...modelVariantLines(info),
    ];
    process.stdout.write(`${lines.join('\n')}\n\n`);
    if (info.accuracy) process.stdout.write(`${accuracyTable(info.accuracy)}\n\n`);

    const tensors = createTable(['', 'name', 'datatype', 'model shape', 'served shape']);
    for (const [kind, specs, served] of [
      ['input', model.inputs, config.inputs],
      ['output', model.outputs, config.outputs],
    ] as const) {
      for (const spec of specs) {
        const servedSpec = served?.find((candidate) => candidate.name === spec.name);
        tensors.push([
          kind,
          spec.name,
          spec.datatype,
          formatShape(spec.shape),
          servedSpec ? formatShape(servedSpec.shape) : '—',
        ]);
      }
    }
    process.stdout.write(`${tensors.toString()}\n\n`);

    const files = createTable(['file', 'size', 'stored', 'sha256']);
    for (const file of manifest.files) {
      const stored = sizes.get(file.path)?.compressedSize;
      files.push([
        file.path,
        formatBytes(file.size),
        stored === undefined ? 'missing' : formatBytes(stored),
        file.sha256.slice(0, 16),
      ]);
    }
    process.stdout.write(`${files.toString()}\n\nconfig (${info.configFile}):\n${modelConfigToYaml(config)}`);
  } finally {
    await source.close();
  }
}
