import { endianness } from 'node:os';
import { DatasetError } from '../core/errors.js';
import type { Datatype } from '../core/datatypes.js';

/**
 * NumPy's `.npy` format, enough to stream rows: the magic, a version 1 or 2 header (a Python
 * dict literal), then the array's bytes in C order. Only little-endian (or byte-order-free)
 * dtypes that map onto a tensor datatype are read; anything else is refused by name.
 */
export interface NpyHeader {
  /** The dtype as the header spells it, e.g. `<f4`. */
  readonly descr: string;
  readonly datatype: Datatype;
  readonly shape: readonly number[];
  /** Where the array's bytes start. */
  readonly dataOffset: number;
  /** Bytes of one row: everything below the first dimension. */
  readonly rowBytes: number;
}

const MAGIC = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]); // \x93NUMPY

/** The dtypes read, by their header spelling, and the datatype each becomes. */
export const NPY_DTYPES: Readonly<Record<string, { datatype: Datatype; bytes: number }>> = {
  '<f4': { datatype: 'FP32', bytes: 4 },
  '<f8': { datatype: 'FP64', bytes: 8 },
  '<i4': { datatype: 'INT32', bytes: 4 },
  '<i8': { datatype: 'INT64', bytes: 8 },
  '|u1': { datatype: 'UINT8', bytes: 1 },
  '|b1': { datatype: 'BOOL', bytes: 1 },
};

/** Bytes that say the header's version and length. */
export const NPY_PREAMBLE_BYTES = 12;

/**
 * Parses the header from the file's first bytes. `bytes` must hold at least the preamble;
 * `npyHeaderLength` says how many are needed in all.
 */
export function parseNpyHeader(bytes: Buffer, source: string): NpyHeader {
  const length = npyHeaderLength(bytes, source);
  if (bytes.length < length) throw new DatasetError(`${source}: the .npy header is truncated`);
  const major = bytes[6] as number;
  const text = bytes.subarray(major === 1 ? 10 : 12, length).toString(major === 3 ? 'utf8' : 'latin1');
  const descr = /['"]descr['"]\s*:\s*['"]([^'"]+)['"]/.exec(text)?.[1];
  const fortran = /['"]fortran_order['"]\s*:\s*(True|False)/.exec(text)?.[1];
  const shapeText = /['"]shape['"]\s*:\s*\(([^)]*)\)/.exec(text)?.[1];
  if (descr === undefined || fortran === undefined || shapeText === undefined) {
    throw new DatasetError(`${source}: the .npy header lacks descr, fortran_order or shape: ${text.trim()}`);
  }
  if (fortran === 'True') {
    throw new DatasetError(
      `${source} is stored in Fortran order (column-major); rows must be contiguous: save it with numpy.save(path, numpy.ascontiguousarray(array))`,
    );
  }
  const dtype = NPY_DTYPES[descr];
  if (!dtype) {
    throw new DatasetError(
      `${source}: dtype ${descr} is not read (${Object.keys(NPY_DTYPES).join(' ')} are; big-endian and others are not)`,
    );
  }
  if (dtype.bytes > 1 && endianness() !== 'LE') {
    throw new DatasetError(`${source}: little-endian ${descr} needs a little-endian machine`);
  }
  const shape = shapeText
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '')
    .map(Number);
  if (shape.length === 0 || !shape.every((dim) => Number.isSafeInteger(dim) && dim >= 0)) {
    throw new DatasetError(`${source}: the array needs a first dimension of rows, got shape (${shapeText})`);
  }
  return {
    descr,
    datatype: dtype.datatype,
    shape,
    dataOffset: length,
    rowBytes: shape.slice(1).reduce((a, b) => a * b, 1) * dtype.bytes,
  };
}

/** The header's whole length (magic to the start of the data), from the preamble. */
export function npyHeaderLength(bytes: Buffer, source: string): number {
  if (bytes.length < NPY_PREAMBLE_BYTES || !bytes.subarray(0, 6).equals(MAGIC)) {
    throw new DatasetError(`${source} is not a .npy file (no \\x93NUMPY magic)`);
  }
  const major = bytes[6] as number;
  if (major === 1) return 10 + bytes.readUInt16LE(8);
  if (major === 2 || major === 3) return 12 + bytes.readUInt32LE(8);
  throw new DatasetError(`${source}: .npy format version ${major} is not read (1 and 2 are)`);
}
