// An archive on the simulated accelerator, as the benchmarks pack it: `config` plus `count`
// `sim` instances held to `cost` (c ms + m ms a row), packed by the CLI into `out`. With
// `device: 'cpu'` the instances run on the CPU and `handler` must hold them to the cost itself.
import { spawnSync } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';

const bin = fileURLToPath(new URL('../bin/batchserve.js', import.meta.url));

/** Packs `<out>/<modelName>.mar`; resolves to it and the config file written beside it. */
export async function packSimArchive({
  out,
  modelName,
  model,
  cost,
  config,
  count = 1,
  device = 'sim',
  handler,
  extraFiles = [],
}) {
  await mkdir(out, { recursive: true });
  const configFile = join(out, 'config.yaml');
  await writeFile(
    configFile,
    stringify({
      ...config,
      instances: [{ count, device }],
      ...(device === 'sim'
        ? { simulated_device: { fixed_cost: `${cost.cMs}ms`, row_cost: `${cost.mMs * 1000}us` } }
        : {}),
    }),
  );
  const packed = spawnSync(process.execPath, [
    bin,
    ...['model-archive', 'pack', '--model-name', modelName, '--serialized-file', model],
    ...(handler ? ['--handler', handler] : []),
    ...['--config-file', configFile, ...extraFiles.flatMap((file) => ['--extra-files', file])],
    ...['--export-path', out],
  ]);
  if (packed.status !== 0) throw new Error(`pack failed: ${packed.stderr}`);
  return { archive: join(out, `${modelName}.mar`), config: configFile };
}
