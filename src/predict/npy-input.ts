import { open, type FileHandle } from 'node:fs/promises';
import { DatasetError } from '../core/errors.js';
import { allocateData, dataFromBytes, type Datatype } from '../core/datatypes.js';
import { batchPlacement, type Tensor, type TensorSpec } from '../core/tensors.js';
import type { ModelSignature } from '../protocol/prepared-request.js';
import type { Dataset, DatasetRow, InputIdentity, LocatedInput, ReadyRow } from './dataset.js';
import { NPY_PREAMBLE_BYTES, npyHeaderLength, parseNpyHeader, type NpyHeader } from './npy.js';

/** One request a row: rows are read this many bytes at a time (at least one row). */
const CHUNK_BYTES = 4 << 20;

/**
 * A `.npy` array whose first dimension is the row, for a model with one input. Its dtype and
 * row shape are checked against that input once, on opening, so a mismatch stops the job
 * before any row runs. Each request gets a buffer of its own: a worker-thread instance copies
 * or moves whole buffers, never part of one. Asked for chunks, it sends that many rows per
 * request, read straight into the buffer the instance takes over.
 */
export function locateNpy(identity: InputIdentity): LocatedInput {
  return {
    identity,
    async open(signature) {
      const handle = await open(identity.path, 'r');
      try {
        const header = await readHeader(handle, identity.path);
        const expected = header.dataOffset + (header.shape[0] as number) * header.rowBytes;
        if (identity.size < expected) {
          throw new DatasetError(
            `${identity.path} is truncated: shape (${header.shape.join(', ')}) needs ${expected} bytes, the file has ${identity.size}`,
          );
        }
        return npyDataset(handle, header, inputFor(header, signature, identity.path), signature);
      } catch (error) {
        await handle.close();
        throw error;
      }
    },
  };
}

async function readHeader(handle: FileHandle, path: string): Promise<NpyHeader> {
  const preamble = Buffer.alloc(NPY_PREAMBLE_BYTES);
  await handle.read(preamble, 0, preamble.length, 0);
  const bytes = Buffer.alloc(npyHeaderLength(preamble, path));
  const { bytesRead } = await handle.read(bytes, 0, bytes.length, 0);
  return parseNpyHeader(bytes.subarray(0, bytesRead), path);
}

/** The model's one input, if the array's dtype and row shape fit it. */
function inputFor(header: NpyHeader, signature: ModelSignature, path: string): TensorSpec {
  const [spec, ...others] = signature.inputs;
  if (!spec || others.length > 0) {
    throw new DatasetError(
      `${path}: a .npy array feeds a model with one input; this one takes ${signature.inputs.map((input) => input.name).join(', ')}`,
    );
  }
  if (header.datatype !== spec.datatype) {
    throw new DatasetError(
      `${path} holds ${header.descr} (${header.datatype}); the model's input "${spec.name}" takes ${spec.datatype}`,
    );
  }
  const dims = rowDims(header, signature);
  const fits = dims.length === spec.shape.length && spec.shape.every((dim, axis) => dim === -1 || dim === dims[axis]);
  if (!fits || header.rowBytes === 0) {
    throw new DatasetError(
      `${path}: rows of shape (${header.shape.slice(1).join(', ')}) do not fit the model's input "${spec.name}" [${spec.shape.join(', ')}]${signature.batching ? ' (its first dimension is the batch)' : ''}`,
    );
  }
  return spec;
}

/** A row's tensor shape: with the batch dimension of 1 when the model batches. */
function rowDims(header: NpyHeader, signature: ModelSignature): number[] {
  const dims = header.shape.slice(1);
  return signature.batching ? [1, ...dims] : dims;
}

function npyDataset(handle: FileHandle, header: NpyHeader, spec: TensorSpec, signature: ModelSignature): Dataset {
  const datatype = spec.datatype as Exclude<Datatype, 'BYTES'>;
  const dims = rowDims(header, signature);
  const elements = dims.reduce((a, b) => a * b, 1);
  const { shapeKey } = batchPlacement(
    { [spec.name]: { datatype, dims, data: allocateData(datatype, elements) } },
    signature.inputs,
    signature.batching,
  );
  const rowCount = header.shape[0] as number;
  const { rowBytes } = header;
  const read = async (into: Uint8Array, first: number, count: number): Promise<void> => {
    const { bytesRead } = await handle.read(into, 0, count * rowBytes, header.dataOffset + first * rowBytes);
    if (bytesRead < count * rowBytes) throw new DatasetError(`the ${header.descr} array ended early at row ${first}`);
  };
  /** Rows `[first, first + count)` as one request over `bytes`, a buffer of their own. */
  const request = (first: number, count: number, bytes: Uint8Array): ReadyRow => {
    const shape = count === 1 ? dims : [count, ...dims.slice(1)];
    const tensor: Tensor = { datatype, dims: shape, data: dataFromBytes(datatype, bytes) };
    return {
      row: first,
      id: String(first),
      request: { kind: 'tensors', inputs: { [spec.name]: tensor }, rows: count, movable: true },
      rows: count,
      shapeKey,
    };
  };
  /** One request a row, read together and copied apart. */
  const readRows = async (first: number, count: number): Promise<ReadyRow[]> => {
    const block = new Uint8Array(count * rowBytes);
    await read(block, first, count);
    return Array.from({ length: count }, (_, index) =>
      request(first + index, 1, block.slice(index * rowBytes, (index + 1) * rowBytes)),
    );
  };
  return {
    rowCount,
    async *rows(from, to, options): AsyncGenerator<DatasetRow> {
      const last = Math.min(to, rowCount);
      const chunkRows = signature.batching ? (options?.chunkRows ?? 1) : 1;
      if (chunkRows > 1) {
        for (let first = from; first < last; first += chunkRows) {
          const count = Math.min(chunkRows, last - first);
          // Not zero-filled: every byte is read into it next.
          const bytes = new Uint8Array(Buffer.allocUnsafeSlow(count * rowBytes).buffer);
          await read(bytes, first, count);
          const ids = Array.from({ length: count }, (_, index) => String(first + index));
          yield { ...request(first, count, bytes), chunk: { count, ids, split: () => readRows(first, count) } };
        }
        return;
      }
      const perRead = Math.max(1, Math.floor(CHUNK_BYTES / rowBytes));
      for (let first = from; first < last; first += perRead)
        yield* await readRows(first, Math.min(perRead, last - first));
    },
    close: () => handle.close(),
  };
}
