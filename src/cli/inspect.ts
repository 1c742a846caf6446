import { modelConfigToYaml } from '../config/load.js';
import { openArchive } from '../archive/source.js';
import { readArchiveContents, requireEntry, type FileCheck } from '../archive/read.js';
import { failedChecksError, hashChecks } from '../archive/verify.js';
import { describeDecoder } from '../runtime/open-generation.js';
import { readGraphSignature } from '../runtime/session.js';
import { createTable } from '../core/table.js';
import { formatBytes, formatShape } from './format.js';
import { accuracyTable, modelVariantLines } from './pack-report.js';

/**
 * What verify checks, shown beside what the archive holds: by default every file is hashed,
 * and an archive verify refuses is shown with each file's status and exits non-zero.
 */
export async function runInspect(location: string, options: { json: boolean; verify: boolean }): Promise<void> {
  const source = await openArchive(location);
  try {
    const { manifest, config } = await readArchiveContents(source);
    const checks = options.verify ? await hashChecks(source, manifest) : undefined;
    const status = new Map(checks?.map((check) => [check.path, check.status]));
    const bad = checks?.filter((check) => check.status !== 'ok') ?? [];
    const modelFile = manifest.model.serializedFile;
    // A pipeline has no graph: its config's tensors are what it serves.
    // A file that failed its check is not parsed: its bytes are not the ones packed.
    const modelBytes = config.pipeline || bad.length > 0 ? undefined : await requireEntry(source, modelFile);
    const modelSource = `${location}!${modelFile}`;
    const model = config.pipeline
      ? { inputs: config.inputs ?? [], outputs: config.outputs ?? [] }
      : modelBytes
        ? await readGraphSignature(modelBytes, modelSource)
        : { inputs: [], outputs: [] };
    // How serve will batch a decoder is found by running it, as serve does at load.
    const generation =
      manifest.model.handler === 'text-generation' && modelBytes
        ? await describeDecoder(modelBytes, model, modelSource)
        : undefined;
    const sizes = new Map(source.entries.map((entry) => [entry.path, entry]));
    const verified = checks === undefined ? null : bad.length === 0;
    if (options.json) {
      process.stdout.write(
        `${JSON.stringify({ location, format: source.format, verified, files: checks, manifest, config, model, ...(generation ? { generation } : {}) }, null, 2)}\n`,
      );
      requireIntact(location, checks);
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
      ...(generation
        ? [
            `generation sequences share a step ${generation.batching === 'padded' ? 'padded' : 'only at equal lengths'}: ${generation.reason}; ` +
              `${formatBytes(generation.cacheBytesPerToken)} of key/value cache a token`,
          ]
        : []),
      `integrity  ${integrityLine(checks, bad)}`,
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

    const files = createTable(['file', 'size', 'stored', 'sha256', 'check']);
    for (const file of manifest.files) {
      const stored = sizes.get(file.path)?.compressedSize;
      files.push([
        file.path,
        formatBytes(file.size),
        stored === undefined ? 'missing' : formatBytes(stored),
        file.sha256.slice(0, 16),
        status.get(file.path) ?? '—',
      ]);
    }
    process.stdout.write(`${files.toString()}\n\nconfig (${info.configFile}):\n${modelConfigToYaml(config)}`);
    requireIntact(location, checks);
  } finally {
    await source.close();
  }
}

function integrityLine(checks: readonly FileCheck[] | undefined, bad: readonly FileCheck[]): string {
  if (checks === undefined) return 'not verified (--no-verify): run verify before trusting these files';
  if (bad.length === 0) return `verified: all ${checks.length} files match the manifest`;
  return `FAILED: ${bad.length} of ${checks.length} files do not match the manifest`;
}

function requireIntact(location: string, checks: readonly FileCheck[] | undefined): void {
  const failed = failedChecksError(location, checks ?? []);
  if (failed) throw failed;
}
