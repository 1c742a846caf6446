import { readdir, readFile } from 'node:fs/promises';
import { extname, join, parse } from 'node:path';
import ort from 'onnxruntime-node';
import type { ImageClassifierOptions } from '../config/model-config.js';
import { bytesPerElement, ortTypeOf, tensorDataFromBytes } from '../core/datatypes.js';
import { UsageError } from '../core/errors.js';
import { mulberry32 } from '../core/random.js';
import type { TensorSpec } from '../core/tensors.js';
import type { TensorMap } from '../handlers/ort-tensors.js';
import { decodeImage, imageToRow } from '../handlers/image.js';
import { parseNpyHeader } from '../predict/npy.js';
import { gateTokenIds } from './gate-token-ids.js';

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

/**
 * A pass built from the outputs the same model gave at the pass before: a decoder's next step
 * reads the cache its last step left.
 */
export type GateStep = (previous: ort.InferenceSession.ReturnType) => TensorMap;
export type GateFeed = TensorMap | GateStep;

export interface GateFeeds<Feed extends GateFeed = GateFeed> {
  readonly source: 'random' | 'calibration';
  /** Forward passes' inputs, in the original model's datatypes. */
  readonly feeds: readonly Feed[];
  readonly samples: number;
}

/**
 * Seeded random inputs in the served shapes: floats uniform in [-1, 1) (normalised images and
 * embeddings live there), integers in [0, 10), booleans at 1/2. A batching model gets
 * RANDOM_ROWS rows in passes of GATE_BATCH; one that does not batch gets GATE_BATCH passes of
 * its own shape. Inputs named as Hugging Face text models name them get what such a model
 * takes, whatever the handler: `input_ids` windows of `tokenIds` (gate-token-ids.ts),
 * `attention_mask` ones, `token_type_ids` zeros (BERT's vocabulary of types is 2),
 * `position_ids` 0, 1, 2… along the tokens.
 */
export function randomGateFeeds(
  inputs: readonly TensorSpec[],
  batching: boolean,
  tokenIds: readonly number[] = gateTokenIds(undefined),
): GateFeeds<TensorMap> {
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
      const text = integerInput(input) ? textInputValues(input.name, dims, tokenIds, next) : undefined;
      const type = ortTypeOf(input.datatype) as Exclude<ort.Tensor.Type, 'string'>;
      const data = text ? integerData(type, text) : randomData(input, length, next);
      feed[input.name] = new ort.Tensor(ortTypeOf(input.datatype), data, dims);
    }
    feeds.push(feed);
  }
  return { source: 'random', feeds, samples: batching ? RANDOM_ROWS : GATE_BATCH };
}

function integerInput(input: TensorSpec): boolean {
  return input.datatype.startsWith('INT') || input.datatype.startsWith('UINT');
}

/** A text input's values by its name, rows along the last axis; undefined for any other input. */
function textInputValues(
  name: string,
  dims: readonly number[],
  tokenIds: readonly number[],
  next: () => number,
): number[] | undefined {
  const tokens = dims.at(-1) ?? 1;
  const length = dims.reduce((a, b) => a * b, 1);
  switch (name) {
    case 'input_ids':
      return tokenWindows(tokenIds, length / tokens, tokens, next).flat();
    case 'attention_mask':
      return new Array<number>(length).fill(1);
    case 'token_type_ids':
      return new Array<number>(length).fill(0);
    case 'position_ids':
      return Array.from({ length }, (_, i) => i % tokens);
    default:
      return undefined;
  }
}

/** `rows` runs of `tokens` consecutive ids of `ids`, each from a seeded offset, wrapping round. */
export function tokenWindows(ids: readonly number[], rows: number, tokens: number, next: () => number): number[][] {
  return Array.from({ length: rows }, () => {
    const start = Math.floor(next() * ids.length);
    return Array.from({ length: tokens }, (_, k) => ids[(start + k) % ids.length] as number);
  });
}

function integerData(type: Exclude<ort.Tensor.Type, 'string'>, values: readonly number[]): ort.Tensor['data'] {
  if (type === 'int64') return BigInt64Array.from(values, BigInt);
  if (type === 'uint64') return BigUint64Array.from(values, BigInt);
  const data = tensorDataFromBytes(type, new Uint8Array(values.length * bytesPerElement(type))) as Int32Array;
  data.set(values);
  return data;
}

function randomData(input: TensorSpec, length: number, next: () => number): ort.Tensor['data'] {
  switch (input.datatype) {
    case 'FP32':
    case 'FP64': {
      const data = input.datatype === 'FP32' ? new Float32Array(length) : new Float64Array(length);
      for (let i = 0; i < length; i++) data[i] = next() * 2 - 1;
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
      return integerData(
        type,
        Array.from({ length }, () => Math.floor(next() * 10)),
      );
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
): Promise<GateFeeds<TensorMap>> {
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
function batchRows(
  inputs: readonly TensorSpec[],
  rows: ReadonlyMap<string, InputRows>,
  directory: string,
): GateFeeds<TensorMap> {
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
