import { readdir, readFile } from 'node:fs/promises';
import { extname, join, parse } from 'node:path';
import ort from 'onnxruntime-node';
import type { ImageClassifierOptions } from '../config/model-config.js';
import { bytesPerElement, ortTypeOf, tensorDataFromBytes } from '../core/datatypes.js';
import { UsageError } from '../core/errors.js';
import { mulberry32 } from '../core/random.js';
import type { TensorMap, TensorSpec } from '../core/tensors.js';
import { decodeImage, imageToRow } from '../handlers/image.js';
import { parseNpyHeader } from '../predict/npy.js';

/** Rows the gate runs per forward pass. */
export const GATE_BATCH = 8;
/** Rows of random inputs: enough that one top-1 disagreement in 64 (98.4 %) still passes 0.97. */
export const RANDOM_ROWS = 64;
/** What a variable dimension other than the batch becomes in random inputs (sequence length, width). */
export const VARIABLE_DIMENSION = 32;
/** Calibration rows beyond this are left out, so pack time stays bounded. */
export const MAX_CALIBRATION_ROWS = 512;
const RANDOM_SEED = 0x5eed;

const IMAGE_EXTENSIONS = new Set(['.png', '.jpg', '.jpeg']);
const RAW_EXTENSIONS = new Set(['.bin', '.raw']);

export interface GateFeeds {
  readonly source: 'random' | 'calibration';
  /** Forward passes' inputs, in the original model's datatypes. */
  readonly feeds: readonly TensorMap[];
  readonly samples: number;
}

/**
 * Seeded random inputs in the served shapes: floats uniform in [-1, 1) (normalised images and
 * embeddings live there), integers in [0, 10) (valid ids for any vocabulary), booleans at 1/2.
 * A batching model gets RANDOM_ROWS rows in passes of GATE_BATCH; one that does not batch gets
 * GATE_BATCH passes of its own shape.
 */
export function randomGateFeeds(inputs: readonly TensorSpec[], batching: boolean): GateFeeds {
  const next = mulberry32(RANDOM_SEED);
  const passes = batching ? RANDOM_ROWS / GATE_BATCH : GATE_BATCH;
  const feeds: TensorMap[] = [];
  for (let pass = 0; pass < passes; pass++) {
    const feed: TensorMap = {};
    for (const input of inputs) {
      const dims = input.shape.map((dim, axis) =>
        batching && axis === 0 ? GATE_BATCH : dim === -1 ? VARIABLE_DIMENSION : dim,
      );
      const length = dims.reduce((a, b) => a * b, 1);
      feed[input.name] = new ort.Tensor(ortTypeOf(input.datatype), randomData(input, length, next), dims);
    }
    feeds.push(feed);
  }
  return { source: 'random', feeds, samples: batching ? RANDOM_ROWS : GATE_BATCH };
}

function randomData(input: TensorSpec, length: number, next: () => number): ort.Tensor['data'] {
  switch (input.datatype) {
    case 'FP32':
    case 'FP64': {
      const data = input.datatype === 'FP32' ? new Float32Array(length) : new Float64Array(length);
      for (let i = 0; i < length; i++) data[i] = next() * 2 - 1;
      return data;
    }
    case 'INT64':
    case 'UINT64': {
      const data = input.datatype === 'INT64' ? new BigInt64Array(length) : new BigUint64Array(length);
      for (let i = 0; i < length; i++) data[i] = BigInt(Math.floor(next() * 10));
      return data;
    }
    case 'BOOL': {
      const data = new Uint8Array(length);
      for (let i = 0; i < length; i++) data[i] = next() < 0.5 ? 0 : 1;
      return data;
    }
    case 'BYTES':
      throw new UsageError(`input "${input.name}" is BYTES: the accuracy gate needs --calibration-data`);
    default: {
      const type = ortTypeOf(input.datatype) as Exclude<ort.Tensor.Type, 'string'>;
      const data = tensorDataFromBytes(type, new Uint8Array(length * bytesPerElement(type))) as Int32Array;
      for (let i = 0; i < length; i++) data[i] = Math.floor(next() * 10);
      return data;
    }
  }
}

/** Rows of one input gathered from files: `rowDims` excludes the batch dimension. */
interface InputRows {
  readonly chunks: { readonly bytes: Uint8Array; readonly rows: number; readonly rowDims: readonly number[] }[];
}

/**
 * Inputs from a folder, for a batching model: `<input>.npy` per input (or any `.npy` for a
 * one-input model; a file of the input's rank holds rows, one of rank − 1 is one row), raw
 * little-endian `.bin`/`.raw` rows of a one-input model with fixed dimensions, or `.png`/`.jpg`
 * images run through the image-classifier's own preprocessing when that is the handler.
 */
export async function calibrationGateFeeds(
  directory: string,
  inputs: readonly TensorSpec[],
  imageOptions: ImageClassifierOptions | undefined,
): Promise<GateFeeds> {
  const names = (await readdir(directory).catch(() => undefined))?.sort();
  if (!names) throw new UsageError(`--calibration-data ${directory} is not a readable folder`);
  const rows = new Map<string, InputRows>(inputs.map((input) => [input.name, { chunks: [] }]));
  const only = inputs.length === 1 ? inputs[0] : undefined;
  for (const name of names) {
    const path = join(directory, name);
    const extension = extname(name).toLowerCase();
    const stem = parse(name).name;
    const input = inputs.find((candidate) => candidate.name === stem) ?? only;
    if (!input) continue;
    if (extension === '.npy') {
      rows.get(input.name)?.chunks.push(npyRows(await readFile(path), input, path));
    } else if (RAW_EXTENSIONS.has(extension) && only) {
      rows.get(only.name)?.chunks.push(rawRows(await readFile(path), only, path));
    } else if (IMAGE_EXTENSIONS.has(extension) && only && imageOptions) {
      rows.get(only.name)?.chunks.push(imageRow(await readFile(path), only, imageOptions, path));
    }
  }
  return batchRows(inputs, rows, directory);
}

function npyRows(bytes: Buffer, input: TensorSpec, source: string): InputRows['chunks'][number] {
  const header = parseNpyHeader(bytes, source);
  if (header.datatype !== input.datatype) {
    throw new UsageError(
      `${source}: dtype ${header.descr} (${header.datatype}), input "${input.name}" is ${input.datatype}`,
    );
  }
  const oneRow = header.shape.length === input.shape.length - 1;
  if (!oneRow && header.shape.length !== input.shape.length) {
    throw new UsageError(
      `${source}: shape (${header.shape.join(', ')}) does not fit input "${input.name}" [${input.shape.join(', ')}]`,
    );
  }
  const rowDims = oneRow ? header.shape : header.shape.slice(1);
  checkRowDims(rowDims, input, source);
  const count = oneRow ? 1 : (header.shape[0] as number);
  return { bytes: bytes.subarray(header.dataOffset), rows: count, rowDims };
}

function rawRows(bytes: Buffer, input: TensorSpec, source: string): InputRows['chunks'][number] {
  const rowDims = input.shape.slice(1);
  if (rowDims.some((dim) => dim === -1)) {
    throw new UsageError(
      `${source}: raw tensors need fixed dimensions, input "${input.name}" is [${input.shape.join(', ')}]; use .npy`,
    );
  }
  const type = ortTypeOf(input.datatype) as Exclude<ort.Tensor.Type, 'string'>;
  const rowBytes = rowDims.reduce((a, b) => a * b, 1) * bytesPerElement(type);
  if (bytes.length === 0 || bytes.length % rowBytes !== 0) {
    throw new UsageError(
      `${source}: ${bytes.length} bytes is not a whole number of ${rowBytes}-byte rows of "${input.name}"`,
    );
  }
  return { bytes, rows: bytes.length / rowBytes, rowDims };
}

function imageRow(
  bytes: Buffer,
  input: TensorSpec,
  options: ImageClassifierOptions,
  source: string,
): InputRows['chunks'][number] {
  const [, a, b, c] = input.shape as [number, number, number, number];
  const geometry =
    options.layout === 'NCHW' ? { channels: a, height: b, width: c } : { height: a, width: b, channels: c };
  if (input.shape.length !== 4 || input.datatype !== 'FP32' || Object.values(geometry).some((dim) => dim < 1)) {
    throw new UsageError(
      `${source}: images need one FP32 input with fixed [C, H, W], "${input.name}" is [${input.shape.join(', ')}]`,
    );
  }
  const row = imageToRow(decodeImage(bytes), geometry, options);
  return { bytes: new Uint8Array(row.buffer), rows: 1, rowDims: input.shape.slice(1) };
}

function checkRowDims(rowDims: readonly number[], input: TensorSpec, source: string): void {
  rowDims.forEach((dim, index) => {
    const expected = input.shape[index + 1] as number;
    if (expected !== -1 && expected !== dim) {
      throw new UsageError(
        `${source}: row shape (${rowDims.join(', ')}) does not fit input "${input.name}" [${input.shape.join(', ')}]`,
      );
    }
  });
}

/** Chunks of every input, taken in step, cut into passes of at most GATE_BATCH rows. */
function batchRows(inputs: readonly TensorSpec[], rows: ReadonlyMap<string, InputRows>, directory: string): GateFeeds {
  const first = inputs[0] as TensorSpec;
  const firstChunks = rows.get(first.name)?.chunks ?? [];
  if (firstChunks.length === 0) {
    throw new UsageError(
      `--calibration-data ${directory} holds no .npy, .bin/.raw or image files for input "${first.name}"`,
    );
  }
  const feeds: TensorMap[] = [];
  let samples = 0;
  firstChunks.forEach((chunk, index) => {
    for (let start = 0; start < chunk.rows && samples < MAX_CALIBRATION_ROWS; start += GATE_BATCH) {
      const count = Math.min(GATE_BATCH, chunk.rows - start, MAX_CALIBRATION_ROWS - samples);
      const feed: TensorMap = {};
      for (const input of inputs) {
        const mine = rows.get(input.name)?.chunks[index];
        if (!mine || mine.rows !== chunk.rows) {
          throw new UsageError(
            `--calibration-data ${directory}: input "${input.name}" needs as many files and rows as "${first.name}"`,
          );
        }
        const type = ortTypeOf(input.datatype) as Exclude<ort.Tensor.Type, 'string'>;
        const rowBytes = mine.rowDims.reduce((a, b) => a * b, 1) * bytesPerElement(type);
        const slice = mine.bytes.subarray(start * rowBytes, (start + count) * rowBytes);
        feed[input.name] = new ort.Tensor(type, tensorDataFromBytes(type, slice), [count, ...mine.rowDims]);
      }
      feeds.push(feed);
      samples += count;
    }
  });
  return { source: 'calibration', feeds, samples };
}
