import { extname } from 'node:path';
import { isDatatype } from '../core/datatypes.js';
import { InputFileError, UsageError } from '../core/errors.js';
import {
  payloadFromBytes,
  randomPayload,
  readInputFile,
  type ModelMetadata,
  type RandomPayloadOptions,
  type RequestPayload,
} from './payload.js';
import type { Protocol } from './report-types.js';
import { elementBytes } from './tensor-values.js';

/**
 * `--input-pool N`: N distinct requests, sent in rotation, so a server's response cache meets
 * each input again and the sweep shows what the cache is worth. Random inputs take seeds
 * seed … seed+N−1. A file's variants are derived deterministically: variant k changes value j
 * of the request when bit j of k is set (k = 0 is the file as it is), each change as small as
 * the datatype allows, so the inputs stay valid (an integer moves by one within its pair
 * 2i, 2i+1, so it never leaves its type's range; a float moves by 2⁻⁹ of itself, a step even
 * FP16 keeps; a boolean flips; a string gains a space).
 */
export function randomPayloadPool(
  metadata: ModelMetadata,
  options: RandomPayloadOptions,
  size: number,
): RequestPayload {
  const seed = options.seed ?? 1;
  return pooled(Array.from({ length: size }, (_, k) => randomPayload(metadata, { ...options, seed: seed + k })));
}

export async function filePayloadPool(
  file: string,
  metadata: ModelMetadata,
  protocol: Protocol,
  size: number,
): Promise<RequestPayload> {
  const bytes = await readInputFile(file);
  // One input is the file as it is, whatever it holds (an image included).
  if (size <= 1) return payloadFromBytes(bytes, file, metadata, protocol);
  const variant = variantMaker(bytes, file, metadata, protocol, size);
  return pooled(Array.from({ length: size }, (_, k) => payloadFromBytes(variant(k), file, metadata, protocol)));
}

/** The values a pool of `size` must be able to change: one bit of the variant number each. */
export function valuesNeeded(size: number): number {
  return size <= 1 ? 0 : Math.ceil(Math.log2(size));
}

function variantMaker(
  bytes: Buffer,
  file: string,
  metadata: ModelMetadata,
  protocol: Protocol,
  size: number,
): (k: number) => Buffer {
  const needed = valuesNeeded(size);
  const tooFew = (found: number): UsageError =>
    new UsageError(
      `--input-pool ${size} needs ${needed} values to vary in ${file}, which has ${found}: give a smaller pool or a larger input`,
    );
  if (extname(file).toLowerCase() === '.json') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(bytes.toString('utf8'));
    } catch (error) {
      throw new InputFileError(`${file} is not JSON: ${(error as Error).message}`, { cause: error });
    }
    // A v2 body varies its tensors' data only (not shapes); a TorchServe body is all data.
    const leaves = (box: { root: unknown }): Leaf[] =>
      protocol === 'torchserve' ? jsonLeaves(box, 'root', needed) : v2DataLeaves(box.root, needed);
    const found = leaves({ root: parsed }).length;
    if (found < needed) throw tooFew(found);
    return (k) => {
      if (k === 0) return bytes;
      const box = { root: structuredClone(parsed) };
      leaves(box).forEach((leaf, bit) => {
        if ((k >> bit) & 1) leaf.parent[leaf.key] = nudged(leaf.parent[leaf.key]);
      });
      return Buffer.from(JSON.stringify(box.root));
    };
  }
  const input = metadata.inputs[0];
  if (protocol === 'torchserve' || !input || !isDatatype(input.datatype) || input.datatype === 'BYTES') {
    throw new UsageError(
      `--input-pool varies tensors: ${file} is not a .json infer body or raw tensor bytes of a fixed-size datatype (an image cannot be varied without changing what it shows)`,
    );
  }
  const width = elementBytes(input.datatype);
  const found = Math.floor(bytes.length / width);
  if (found < needed) throw tooFew(found);
  return (k) => {
    if (k === 0) return bytes;
    const copy = Buffer.from(bytes);
    // Little-endian: an element's first byte holds its lowest bits.
    for (let bit = 0; bit < needed; bit++) if ((k >> bit) & 1) copy[bit * width] = (copy[bit * width] as number) ^ 1;
    return copy;
  };
}

interface Leaf {
  readonly parent: Record<string | number, unknown>;
  readonly key: string | number;
}

/** The first `limit` scalar values of `parent[key]`, a JSON value, depth first. */
function jsonLeaves(parent: object, key: string | number, limit: number): Leaf[] {
  const leaves: Leaf[] = [];
  const walk = (parent: Record<string | number, unknown>, key: string | number): void => {
    if (leaves.length >= limit) return;
    const value = parent[key];
    if (value !== null && typeof value === 'object') {
      for (const inner of Object.keys(value)) walk(value as Record<string, unknown>, inner);
    } else if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'string') {
      leaves.push({ parent, key });
    }
  };
  walk(parent as Record<string | number, unknown>, key);
  return leaves;
}

/** The first `limit` values of a v2 JSON body's `inputs[*].data`. */
function v2DataLeaves(root: unknown, limit: number): Leaf[] {
  const inputs = (root as { inputs?: unknown } | null)?.inputs;
  if (!Array.isArray(inputs)) return [];
  return inputs
    .flatMap((input: unknown) =>
      input !== null && typeof input === 'object' && 'data' in input ? jsonLeaves(input, 'data', limit) : [],
    )
    .slice(0, limit);
}

function nudged(value: unknown): unknown {
  if (typeof value === 'boolean') return !value;
  if (typeof value === 'string') return `${value} `;
  const number = value as number;
  if (Number.isInteger(number)) return number % 2 === 0 ? number + 1 : number - 1;
  return number * (1 + 2 ** -9);
}

/** One payload that sends every body in turn; the bodies differ, nothing else does. */
function pooled(payloads: readonly RequestPayload[]): RequestPayload {
  const [first] = payloads;
  if (!first) throw new UsageError('--input-pool must be at least 1');
  return payloads.length === 1 ? first : { ...first, bodies: payloads.map((payload) => payload.body) };
}
