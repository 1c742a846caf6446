import { bytesPerElement, ortTypeOf, type Datatype } from '../core/datatypes.js';

/** The bench's tensor data: seeded random values, and their bytes in Triton's binary layout. */

export type Value = number | boolean | string;

/**
 * Floats are multiples of 1/1024 in [-1, 1], exact in FP16, FP32 and FP64 alike, so the JSON
 * and binary forms carry the same tensor. Integers are small (0–99): valid as token ids or
 * indices for most models. BYTES are 8 lowercase letters.
 */
export function randomValues(datatype: Datatype, count: number, random: () => number): Value[] {
  const values = new Array<Value>(count);
  for (let i = 0; i < count; i++) {
    switch (datatype) {
      case 'FP16':
      case 'FP32':
      case 'FP64':
        values[i] = (Math.floor(random() * 2049) - 1024) / 1024;
        break;
      case 'BOOL':
        values[i] = random() < 0.5;
        break;
      case 'BYTES':
        values[i] = String.fromCharCode(...Array.from({ length: 8 }, () => 97 + Math.floor(random() * 26)));
        break;
      default:
        values[i] = Math.floor(random() * 100);
    }
  }
  return values;
}

export function elementBytes(datatype: Exclude<Datatype, 'BYTES'>): number {
  return bytesPerElement(ortTypeOf(datatype) as Parameters<typeof bytesPerElement>[0]);
}

/** Triton's binary layout: little-endian, row-major; BOOL a byte; BYTES length-prefixed UTF-8. */
export function binaryTensor(datatype: Datatype, values: readonly Value[]): Buffer {
  if (datatype === 'BYTES') {
    return Buffer.concat(
      values.map((value) => {
        const text = Buffer.from(String(value));
        const length = Buffer.alloc(4);
        length.writeUInt32LE(text.length);
        return Buffer.concat([length, text]);
      }),
    );
  }
  const size = elementBytes(datatype);
  const bytes = Buffer.alloc(values.length * size);
  values.forEach((value, index) => {
    const at = index * size;
    const number = Number(value);
    switch (datatype) {
      case 'FP16':
        return bytes.writeUInt16LE(exactHalf(number), at);
      case 'FP32':
        return bytes.writeFloatLE(number, at);
      case 'FP64':
        return bytes.writeDoubleLE(number, at);
      case 'INT64':
        return bytes.writeBigInt64LE(BigInt(number), at);
      case 'UINT64':
        return bytes.writeBigUInt64LE(BigInt(number), at);
      case 'INT8':
      case 'INT16':
      case 'INT32':
        return bytes.writeIntLE(number, at, size);
      default:
        return bytes.writeUIntLE(number, at, size);
    }
  });
  return bytes;
}

/** Half-precision bits of k/1024, |k| ≤ 1024: always a normal half, so no rounding is needed. */
function exactHalf(value: number): number {
  const units = Math.round(Math.abs(value) * 1024);
  if (units === 0) return 0;
  const exponent = 31 - Math.clz32(units);
  const bits = ((exponent + 5) << 10) | ((units - 2 ** exponent) << (10 - exponent));
  return value < 0 ? bits | 0x8000 : bits;
}
