import { Option, type Command } from 'commander';
import { booleanOption, commaList, fractionOption, integerOption } from './options.js';
import type { ExportCommandOptions, ImportCommandOptions } from './import.js';
import type { PackCommandOptions } from './pack.js';
import { ARCHIVE_FORMATS } from '../archive/format.js';
import { MODEL_PRECISIONS } from '../archive/manifest.js';

/** Flags only: each action lazy-loads its command module. */
export function registerModelArchive(program: Command): void {
  const archive = program
    .command('model-archive')
    .description('bundle an ONNX model, a handler and a config into one checked archive (.mar)');

  archive
    .command('pack')
    .description('check a model, handler and config together and write the archive')
    .requiredOption('--model-name <name>', 'model name ([A-Za-z0-9][A-Za-z0-9_.-]*)')
    .option('--serialized-file <path>', 'the ONNX model file (required unless the config declares a pipeline)')
    .option('--version <version>', 'model version', '1.0')
    .option(
      '--handler <name|file>',
      'built-in handler (tensor, image-classifier, text-embedding, text-classifier, text-generation) or a .js/.ts handler file',
      'tensor',
    )
    .option('--config-file <path>', 'model-config.yaml (or .json); inputs/outputs are inferred when left out')
    .option('--extra-files <paths>', 'comma-separated files or folders to include (labels, vocabularies)', commaList)
    .option('--export-path <dir>', 'where to write the archive', '.')
    .addOption(
      new Option('--archive-format <format>', 'zip, zip-store (no compression) or dir')
        .choices(ARCHIVE_FORMATS)
        .default('zip'),
    )
    .option('--optimize', "also store onnxruntime's optimised graph (level extended), served on cpu", false)
    .addOption(
      new Option('--precision <precision>', 'convert the model: fp16 or int8 (default: as exported)').choices(
        MODEL_PRECISIONS,
      ),
    )
    .option(
      '--keep-io-types [boolean]',
      'fp16: keep float32 inputs and outputs (Casts at the edges)',
      (value: string) => booleanOption(value, '--keep-io-types'),
      true,
    )
    .option('--fp32-ops <ops>', 'fp16: comma-separated op types to keep in float32', commaList)
    .option('--calibration-data <dir>', 'accuracy gate inputs: .npy, raw .bin/.raw, or images (default: seeded random)')
    .option(
      '--max-error <x>',
      'accuracy gate: max relative error per output (default: fp16 0.05, int8 0.15)',
      (value: string) => fractionOption(value, '--max-error'),
    )
    .option(
      '--min-agreement <fraction>',
      'accuracy gate: top-1 agreement per classifier output, decoded agreement per sequence output (default: fp16 0.98, int8 0.95)',
      (value: string) => fractionOption(value, '--min-agreement'),
    )
    .option(
      '--accept-accuracy-loss',
      'with --precision: pack a model that fails the accuracy gate (the manifest records passed: false)',
      false,
    )
    .option('-f, --force', 'replace an existing archive', false)
    .action(async (options: PackCommandOptions) => {
      const { runPack } = await import('./pack.js');
      await runPack(options);
    });

  archive
    .command('inspect')
    .description("show an archive's manifest, config, model inputs/outputs and files, verified as verify does")
    .argument('<archive>', '.mar file or archive folder')
    .option('--json', 'print one JSON document for scripts', false)
    .option('--no-verify', 'skip hashing every file against the manifest (inspect then says it did not verify)')
    .action(async (location: string, options: { json: boolean; verify: boolean }) => {
      const { runInspect } = await import('./inspect.js');
      await runInspect(location, options);
    });

  archive
    .command('verify')
    .description('recompute every hash; exit 0 only when all match the manifest')
    .argument('<archive>', '.mar file or archive folder')
    .option('--json', 'print the report as JSON', false)
    .option(
      '--max-expansion <ratio>',
      'largest ratio of the expanded size to the zip file size, once past 32 MiB (default 200; docs/archives.md)',
      (value: string) => integerOption(value, '--max-expansion', 1),
    )
    .action(async (location: string, options: { json: boolean; maxExpansion?: number }) => {
      const { runVerify } = await import('./verify.js');
      await runVerify(location, options);
    });

  archive
    .command('unpack')
    .description('safely extract an archive into a new folder')
    .argument('<archive>', '.mar file')
    .option('-o, --output <dir>', 'target folder (default: the archive name without .mar)')
    .option('-f, --force', 'replace an existing target folder', false)
    .option(
      '--max-expansion <ratio>',
      'largest ratio of the expanded size to the zip file size, once past 32 MiB (default 200; docs/archives.md)',
      (value: string) => integerOption(value, '--max-expansion', 1),
    )
    .action(async (location: string, options: { output?: string; force: boolean; maxExpansion?: number }) => {
      const { runUnpack } = await import('./unpack.js');
      await runUnpack(location, options);
    });

  archive
    .command('import')
    .description(
      "rewrite an archive torch-model-archiver made (ONNX model), or a Triton model folder, into batchserve's, saying what differs",
    )
    .argument('<archive>', "TorchServe's .mar file or folder, or a Triton model folder (config.pbtxt, 1/model.onnx)")
    .option('--export-path <dir>', 'where to write the archive', '.')
    .option('--handler <name|file>', "what replaces TorchServe's handler (required when it is a Python file)")
    .option('--config-file <path>', "a batchserve model-config.yaml instead of what TorchServe's config maps onto")
    .option('--model-name <name>', "default: the manifest's modelName (Triton: the folder's name)")
    .option('--version <n>', 'Triton model folder: the version folder to import (default: the highest)')
    .addOption(
      new Option('--archive-format <format>', 'zip, zip-store (no compression) or dir')
        .choices(ARCHIVE_FORMATS)
        .default('zip'),
    )
    .option('-f, --force', 'replace an existing archive', false)
    .action(async (location: string, options: ImportCommandOptions) => {
      const { runImport } = await import('./import.js');
      await runImport(location, options);
    });

  archive
    .command('export')
    .description('write an archive as a Triton model folder (config.pbtxt, <version>/model.onnx), saying what differs')
    .argument('<archive>', 'a batchserve .mar file or archive folder')
    .option('--triton', 'a Triton model folder, in --export-path as in a Triton model repository', false)
    .option('--export-path <dir>', 'the model repository to write the model folder into', '.')
    .option('-f, --force', 'replace an existing model folder', false)
    .action(async (location: string, options: ExportCommandOptions) => {
      const { runExport } = await import('./import.js');
      await runExport(location, options);
    });

  archive
    .command('init')
    .description('write a handler and a model config to start from')
    .addOption(new Option('--template <name>', 'template').choices(['tensor', 'image-classifier']).default('tensor'))
    .option('--dir <dir>', 'where to write the files', '.')
    .option('-f, --force', 'overwrite existing files', false)
    .action(async (options: { template: string; dir: string; force: boolean }) => {
      const { runInit } = await import('./init.js');
      await runInit(options);
    });
}
