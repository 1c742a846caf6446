import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PNG } from 'pngjs';
import { packArchive } from '../../src/archive/pack.js';
import { DEMO_MODEL_PATH } from '../../src/runtime/demo-model.js';
import type { PredictOptions } from '../../src/predict/predict-job.js';

export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const BIN = join(ROOT, 'bin', 'batchserve.js');

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `batchserve ARGS` as a child process, with its output once it exits. */
export function cli(args: readonly string[], env: Record<string, string> = {}): Promise<Run> {
  return finished(start(args, env));
}

export function start(args: readonly string[], env: Record<string, string> = {}): ChildProcess {
  return spawn(process.execPath, [BIN, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

export function finished(child: ChildProcess): Promise<Run> {
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  // 'close', not 'exit': only then has all the output been read.
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
}

/** An expected failure prints exactly one line on stderr, naming its code. */
export function assertOneLineError(run: Run, exitCode: number, code: string): void {
  assert.equal(run.code, exitCode, run.stderr);
  const lines = run.stderr.trimEnd().split('\n');
  assert.equal(lines.length, 1, run.stderr);
  assert.match(lines[0] ?? '', new RegExp(`^batchserve: .*\\[${code}\\]$`));
}

/** Library options for a quiet job; tests override what they exercise. */
export function jobOptions(
  archive: string,
  input: PredictOptions['input'],
  output: string,
  extra: Partial<PredictOptions> = {},
): PredictOptions {
  return {
    archive,
    input,
    output,
    resume: false,
    force: false,
    progress: { mode: 'quiet', write: () => undefined, intervalMs: 1000 },
    checkpointIntervalMs: 1000,
    ...extra,
  };
}

/** The demo model with the image-classifier handler, as benchmarks and the README pack it. */
export async function packOrientation(dir: string, handler = 'image-classifier'): Promise<string> {
  const examples = join(ROOT, 'examples', 'orientation');
  const packed = await packArchive({
    modelName: 'orientation',
    version: '1',
    serializedFile: DEMO_MODEL_PATH,
    handler,
    configFile: join(examples, 'model-config.yaml'),
    extraFiles: [join(examples, 'labels.txt')],
    exportPath: join(dir, 'store'),
    force: true,
  });
  return packed.path;
}

export function png(width: number, height: number, pixel: (x: number, y: number) => [number, number, number]): Buffer {
  const image = new PNG({ width, height });
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) image.data.set([...pixel(x, y), 255], (y * width + x) * 4);
  }
  return PNG.sync.write(image);
}

/** A "text line" of dark strokes on white, its stroke pattern varied by `seed`; upside down when `flip`. */
export function textLine(seed: number, flip = false): Buffer {
  return png(120 + (seed % 5) * 16, 32, (x, y) => {
    const [u, v] = flip ? [119 - x, 31 - y] : [x, y];
    const ink = (u % (9 + (seed % 4)) < 5 && v > 8 && v < 26) || (v < 12 && u % (20 + seed) < 3);
    return ink ? [20, 20, 20] : [250, 250, 250];
  });
}

export async function writeFiles(dir: string, files: Record<string, Buffer | string>): Promise<void> {
  for (const [name, content] of Object.entries(files)) {
    await mkdir(dirname(join(dir, name)), { recursive: true });
    await writeFile(join(dir, name), content);
  }
}

/**
 * A `.npy` file: magic, version, header dict padded so the data starts on a multiple of 64,
 * then `data` as given (C order unless the header says otherwise).
 */
export function npy(
  descr: string,
  shape: readonly number[],
  data: ArrayBufferView,
  { version = 1, fortran = false }: { version?: 1 | 2; fortran?: boolean } = {},
): Buffer {
  const dims = shape.length === 1 ? `${shape[0]},` : shape.join(', ');
  let header = `{'descr': '${descr}', 'fortran_order': ${fortran ? 'True' : 'False'}, 'shape': (${dims}), }`;
  const preamble = version === 1 ? 10 : 12;
  header += ' '.repeat(64 - ((preamble + header.length + 1) % 64)) + '\n';
  const head = Buffer.alloc(preamble);
  Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, version, 0]).copy(head);
  if (version === 1) head.writeUInt16LE(header.length, 8);
  else head.writeUInt32LE(header.length, 8);
  return Buffer.concat([
    head,
    Buffer.from(header, 'latin1'),
    Buffer.from(data.buffer, data.byteOffset, data.byteLength),
  ]);
}

/** A v2 JSON line for the affine model's `x` [rows, 4]. */
export function v2Line(rows: readonly (readonly number[])[]): string {
  return JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [rows.length, 4], data: rows.flat() }] });
}
