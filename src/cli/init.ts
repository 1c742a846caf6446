import { copyFile, mkdir, readdir, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { OutputExistsError } from '../core/errors.js';

const TEMPLATES = new URL('../../../templates/', import.meta.url);

export async function runInit(options: { template: string; dir: string; force: boolean }): Promise<void> {
  const source = new URL(`${options.template}/`, TEMPLATES);
  const target = resolve(options.dir);
  const names = await readdir(source);
  if (!options.force) {
    const existing = [];
    for (const name of names) if (await stat(join(target, name)).catch(() => undefined)) existing.push(name);
    if (existing.length > 0) {
      throw new OutputExistsError(`${existing.join(', ')} already exist in ${target}; pass --force to overwrite`);
    }
  }
  await mkdir(target, { recursive: true });
  for (const name of names) await copyFile(new URL(name, source), join(target, name));
  process.stdout.write(
    `wrote ${names.join(', ')} to ${target} (template ${options.template}); edit them, then run:\n` +
      `  batchserve model-archive pack --model-name NAME --serialized-file model.onnx --handler handler.js --config-file model-config.yaml` +
      `${names.includes('labels.txt') ? ' --extra-files labels.txt' : ''}\n`,
  );
}
