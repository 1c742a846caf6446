import { createHash } from 'node:crypto';
import type { HandlerRequest } from '../core/request.js';
import { isTensors, type Tensor, type Tensors } from '../core/tensors.js';

/** A request's identity in the cache: a strong hash to find it, and every byte to confirm it. */
export interface CacheKey {
  readonly hash: string;
  readonly material: Buffer;
}

interface Entry {
  readonly material: Buffer;
  readonly response: unknown;
  readonly bytes: number;
}

export interface CacheChanges {
  /** Entries pushed out to make room. */
  evicted(count: number): void;
  /** Bytes held now. */
  sized(bytes: number): void;
}

/**
 * One model version's response cache (Triton's response_cache): answers by their request's
 * inputs, least recently used first out when `maxBytes` would be passed. The key covers every
 * input's name, datatype, shape and bytes (a TorchServe request's content type and body); it is
 * found by its SHA-256 and compared byte for byte before an answer is served, so a collision
 * can never serve another request's answer. What is cached is the model's whole answer, every
 * output before a request picks its outputs or asks for classification, so those are applied
 * to a cached answer as to a fresh one and need not be in the key. A version's cache goes with
 * it: a reload starts empty.
 */
export class ResponseCache {
  readonly #entries = new Map<string, Entry>();
  readonly #maxBytes: number;
  readonly #changes: CacheChanges;
  #bytes = 0;

  constructor(maxBytes: number, changes: CacheChanges) {
    this.#maxBytes = maxBytes;
    this.#changes = changes;
  }

  get bytes(): number {
    return this.#bytes;
  }

  /** The key of a request: its tensors, its body and content type, or its texts. */
  keyOf(request: HandlerRequest): CacheKey {
    const parts: Buffer[] = [];
    if (request.kind === 'tensors') {
      for (const name of Object.keys(request.inputs).sort()) {
        const tensor = request.inputs[name] as Tensor;
        parts.push(Buffer.from(`${JSON.stringify([name, tensor.datatype, tensor.dims])}\n`), tensorBytes(tensor));
      }
    } else if (request.kind === 'body') {
      parts.push(Buffer.from(`${JSON.stringify(['body', request.contentType ?? ''])}\n`), request.body);
    } else {
      parts.push(Buffer.from(`${JSON.stringify(['texts', request.texts])}\n`));
    }
    // Length-prefixed, so no two different requests can concatenate to the same bytes.
    const material = Buffer.concat(parts.flatMap((part) => [lengthOf(part), part]));
    return { hash: createHash('sha256').update(material).digest('hex'), material };
  }

  /** The cached answer for `key`, after a full comparison; it becomes the most recently used. */
  get(key: CacheKey): unknown {
    const entry = this.#entries.get(key.hash);
    if (entry === undefined || !entry.material.equals(key.material)) return undefined;
    this.#entries.delete(key.hash);
    this.#entries.set(key.hash, entry);
    return entry.response;
  }

  /** Keeps a copy of `response`; an answer larger than the whole cache is not kept. */
  put(key: CacheKey, response: unknown): void {
    const copy = ownCopy(response);
    const bytes = key.material.length + sizeOf(copy);
    if (bytes > this.#maxBytes) return;
    const previous = this.#entries.get(key.hash);
    if (previous) {
      this.#entries.delete(key.hash);
      this.#bytes -= previous.bytes;
    }
    let evicted = 0;
    for (const [hash, entry] of this.#entries) {
      if (this.#bytes + bytes <= this.#maxBytes) break;
      this.#entries.delete(hash);
      this.#bytes -= entry.bytes;
      evicted += 1;
    }
    this.#entries.set(key.hash, { material: key.material, response: copy, bytes });
    this.#bytes += bytes;
    if (evicted > 0) this.#changes.evicted(evicted);
    this.#changes.sized(this.#bytes);
  }
}

function lengthOf(part: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32LE(part.length);
  return length;
}

function tensorBytes(tensor: Tensor): Buffer {
  const { data } = tensor;
  if (Array.isArray(data)) return Buffer.from(JSON.stringify(data));
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
}

/**
 * The answer detached from the batch it came from: a request's outputs are often views of its
 * batch's tensors, which would keep the whole batch alive and make the byte count a lie.
 */
function ownCopy(response: unknown): unknown {
  if (isTensors(response)) {
    const copy: Tensors = {};
    for (const [name, { datatype, dims, data }] of Object.entries(response)) {
      copy[name] = { datatype, dims: [...dims], data: Array.isArray(data) ? [...data] : data.slice() };
    }
    return copy;
  }
  if (Buffer.isBuffer(response)) return Buffer.from(response);
  return response === undefined ? undefined : (JSON.parse(JSON.stringify(response)) as unknown);
}

function sizeOf(response: unknown): number {
  if (isTensors(response)) {
    let bytes = 0;
    for (const tensor of Object.values(response)) bytes += tensorBytes(tensor).length;
    return bytes;
  }
  if (Buffer.isBuffer(response)) return response.length;
  return Buffer.byteLength(JSON.stringify(response) ?? '');
}
