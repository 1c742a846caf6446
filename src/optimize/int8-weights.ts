/**
 * Symmetric int8 weight quantisation, as onnxruntime's quantizer does for QInt8 weights
 * (`WeightSymmetric`, its default for int8): the range is ±max|w| mapped onto [-q, q], so the
 * zero point is 0 and `scale = max|w| / q` (1 for an all-zero weight). Values are rounded half
 * to even, like numpy's `rint`. q is 127 (FULL_RANGE), or 64 (REDUCED_RANGE, the quantizer's
 * `reduce_range`) for weights an integer kernel multiplies with uint8 activations.
 */
export interface QuantizedWeight {
  readonly values: Int8Array;
  /** One scale for the tensor, or one per output channel (axis 0). */
  readonly scales: Float32Array;
}

export const FULL_RANGE = 127;
/**
 * 7 bits, for weights run through MatMulInteger: x86 CPUs without VNNI multiply uint8 by int8
 * with AVX2's vpmaddubsw, which adds each pair of products in int16 and saturates past 32767 —
 * 2·255·127 = 64770 with 8-bit weights, 2·255·64 = 32640 with these. onnxruntime's docs advise
 * `reduce_range` there; a model is packed once and served on whatever CPU comes, so it is
 * always on. On an AMD EPYC with AVX2 alone the 8-bit weights put the test model's output out
 * by 16 % of its range.
 */
export const REDUCED_RANGE = 64;

/** The float32 scale for a range of ±`absMax` onto ±`range`. */
export function symmetricScale(absMax: number, range: number): number {
  return absMax === 0 ? 1 : Math.fround(absMax / range);
}

export function roundHalfEven(value: number): number {
  const rounded = Math.round(value);
  return Math.abs(value % 1) === 0.5 && rounded % 2 !== 0 ? rounded - 1 : rounded;
}

function quantizeRange(weights: Float32Array, out: Int8Array, start: number, end: number, range: number): number {
  let absMax = 0;
  for (let index = start; index < end; index++) absMax = Math.max(absMax, Math.abs(weights[index]!));
  const scale = symmetricScale(absMax, range);
  for (let index = start; index < end; index++) {
    out[index] = Math.max(-range, Math.min(range, roundHalfEven(weights[index]! / scale)));
  }
  return scale;
}

export function quantizePerTensor(weights: Float32Array, range: number): QuantizedWeight {
  const values = new Int8Array(weights.length);
  return { values, scales: Float32Array.of(quantizeRange(weights, values, 0, weights.length, range)) };
}

/** One scale per slice along axis 0 (a Conv weight's output channels). */
export function quantizePerChannel(weights: Float32Array, channels: number, range: number): QuantizedWeight {
  const values = new Int8Array(weights.length);
  const scales = new Float32Array(channels);
  const perChannel = weights.length / channels;
  for (let channel = 0; channel < channels; channel++) {
    scales[channel] = quantizeRange(weights, values, channel * perChannel, (channel + 1) * perChannel, range);
  }
  return { values, scales };
}
