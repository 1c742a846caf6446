// The demo model's archive as the benchmarks pack it: PaddleOCR's orientation classifier with
// examples/orientation's labels, under a handler and config the benchmark chooses.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEMO_MODEL_PATH } from '../dist/src/runtime/demo-model.js';

export { DEMO_MODEL_PATH };

export const DEMO_EXAMPLES = fileURLToPath(new URL('../examples/orientation/', import.meta.url));

/** `batchserve` arguments that pack `<exportPath>/orientation.mar`. */
export function demoPackArgs({
  exportPath,
  handler = 'image-classifier',
  configFile = join(DEMO_EXAMPLES, 'model-config.yaml'),
}) {
  return [
    'model-archive',
    'pack',
    ...['--model-name', 'orientation', '--serialized-file', DEMO_MODEL_PATH, '--handler', handler],
    ...['--config-file', configFile, '--extra-files', join(DEMO_EXAMPLES, 'labels.txt')],
    ...['--export-path', exportPath],
  ];
}
