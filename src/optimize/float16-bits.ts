/** The largest finite float16. */
export const FLOAT16_MAX = 65504;
/** The smallest positive float16 (a subnormal, 2^-24). */
export const FLOAT16_MIN_POSITIVE = 2 ** -24;

const float32 = new Float32Array(1);
const float32Bits = new Uint32Array(float32.buffer);

/** The IEEE binary16 bits of a number, rounded to nearest, ties to even (as numpy and onnxruntime do). */
export function float16Bits(value: number): number {
  float32[0] = value;
  const bits = float32Bits[0]!;
  const sign = (bits >>> 16) & 0x8000;
  const exponent = (bits >>> 23) & 0xff;
  const mantissa = bits & 0x7fffff;
  if (exponent === 0xff) return sign | 0x7c00 | (mantissa === 0 ? 0 : 0x200);
  const halfExponent = exponent - 127 + 15;
  if (halfExponent >= 0x1f) return sign | 0x7c00;
  if (halfExponent <= 0) {
    // Subnormal in float16: shift the mantissa, with its implicit leading 1, into place.
    if (halfExponent < -10) return sign;
    const shift = 14 - halfExponent;
    const full = mantissa | 0x800000;
    return sign | roundShift(full, shift);
  }
  // A carry out of the mantissa correctly bumps the exponent (up to infinity).
  return sign | ((halfExponent << 10) + roundShift(mantissa, 13));
}

function roundShift(value: number, shift: number): number {
  const kept = value >>> shift;
  const rest = value & ((1 << shift) - 1);
  const half = 1 << (shift - 1);
  return rest > half || (rest === half && (kept & 1) === 1) ? kept + 1 : kept;
}

/** The number a float16 bit pattern stands for. */
export function float16Value(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >>> 10) & 0x1f;
  const mantissa = bits & 0x3ff;
  if (exponent === 0) return sign * mantissa * FLOAT16_MIN_POSITIVE;
  if (exponent === 0x1f) return mantissa === 0 ? sign * Infinity : NaN;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

/**
 * Float32 values as little-endian float16 bytes. Finite values beyond ±65504 become ±65504 and
 * non-zero values smaller than the smallest float16 become ±2^-24, instead of turning into
 * infinities and zeros; `clamped` counts them. Infinities and NaN stay what they are.
 */
export function toFloat16Bytes(values: ArrayLike<number>): { bytes: Uint8Array; clamped: number } {
  const bytes = new Uint8Array(values.length * 2);
  const view = new DataView(bytes.buffer);
  let clamped = 0;
  for (let index = 0; index < values.length; index++) {
    let value = values[index]!;
    const magnitude = Math.abs(value);
    if (Number.isFinite(value) && magnitude > FLOAT16_MAX) {
      value = Math.sign(value) * FLOAT16_MAX;
      clamped++;
    } else if (value !== 0 && magnitude < FLOAT16_MIN_POSITIVE) {
      value = Math.sign(value) * FLOAT16_MIN_POSITIVE;
      clamped++;
    }
    view.setUint16(index * 2, float16Bits(value), true);
  }
  return { bytes, clamped };
}
