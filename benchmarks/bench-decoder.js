// The bench decoder (generation.js): a Llama-shaped decoder of 23.2 M parameters written by
// scripts/torch-text-fixtures.py --bench-decoder (Debian's python3 with torch; about 10 s),
// kept in a folder under the system's temp folder named by that script's hash, so it is made
// once per version of the script and never committed; its prompts; its text-generation archive.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';

const bin = fileURLToPath(new URL('../bin/batchserve.js', import.meta.url));
const SCRIPT = fileURLToPath(new URL('../scripts/torch-text-fixtures.py', import.meta.url));
const PYTHON = '/usr/bin/python3';

/** The decoder's folder (model.onnx, tokenizer.json, bench.json), made first if absent; its bench.json and vocabulary. */
export async function benchDecoder() {
  const hash = createHash('sha256').update(readFileSync(SCRIPT)).digest('hex').slice(0, 12);
  const dir = join(tmpdir(), `batchserve-bench-decoder-${hash}`);
  if (!existsSync(join(dir, 'bench.json'))) {
    const torch = spawnSync(PYTHON, ['-c', 'import torch, onnx'], { stdio: 'ignore' });
    if (torch.status !== 0) {
      throw new Error(
        `the bench decoder is made by ${PYTHON} with torch and onnx, which this machine lacks ` +
          `(Debian: apt-get install python3-torch python3-onnx); or make it elsewhere with ` +
          `\`python3 scripts/torch-text-fixtures.py --bench-decoder ${dir}\` and copy the folder here`,
      );
    }
    const partial = `${dir}.partial-${process.pid}`;
    console.log(`making the bench decoder in ${dir} (about 10 s)`);
    const made = spawnSync(PYTHON, [SCRIPT, '--bench-decoder', partial], { stdio: 'inherit' });
    if (made.status !== 0) {
      await rm(partial, { recursive: true, force: true });
      throw new Error(`torch-text-fixtures.py --bench-decoder exited with ${made.status}`);
    }
    await rm(dir, { recursive: true, force: true });
    await rename(partial, dir);
  }
  const bench = JSON.parse(await readFile(join(dir, 'bench.json'), 'utf8'));
  const tokenizer = JSON.parse(await readFile(join(dir, 'tokenizer.json'), 'utf8'));
  return {
    dir,
    model: join(dir, 'model.onnx'),
    tokenizer: join(dir, 'tokenizer.json'),
    bench,
    vocab: tokenizer.model.vocab,
  };
}

/**
 * `count` distinct prompts of `length` words w0…w1020 (one token each), drawn from `random`:
 * the text the server gets and the ids the plain loop feeds.
 */
export function prompts(decoder, random, count, length) {
  const words = Object.keys(decoder.vocab).filter((word) => /^w\d+$/.test(word));
  return Array.from({ length: count }, () => {
    const picked = Array.from({ length }, () => words[Math.floor(random() * words.length)]);
    return { text: picked.join(' '), ids: picked.map((word) => decoder.vocab[word]) };
  });
}

/** Packs `<out>/<modelName>.mar` serving the decoder on the CPU with `generation` options, one thread for the model. */
export async function packDecoderArchive({ out, modelName, decoder, generation }) {
  await mkdir(out, { recursive: true });
  const configFile = join(out, 'config.yaml');
  await writeFile(
    configFile,
    stringify({
      max_batch_size: generation.max_active_sequences,
      runtime: { intra_op_threads: 1, inter_op_threads: 1 },
      text: { tokenizer_file: 'tokenizer.json' },
      generation,
    }),
  );
  const packed = spawnSync(process.execPath, [
    bin,
    ...['model-archive', 'pack', '--model-name', modelName, '--serialized-file', decoder.model],
    ...['--handler', 'text-generation', '--config-file', configFile, '--extra-files', decoder.tokenizer],
    ...['--export-path', out],
  ]);
  if (packed.status !== 0) throw new Error(`pack failed: ${packed.stderr}`);
  return join(out, `${modelName}.mar`);
}
