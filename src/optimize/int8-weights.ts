/**
 * Symmetric int8 weight quantisation, as onnxruntime's quantizer does for QInt8 weights
 * (`WeightSymmetric`, its default for int8): the range is ±max|w| mapped onto [-127, 127], so
 * the zero point is 0 and `scale = max|w| / 127` (1 for an all-zero weight). Values are rounded
 * half to even, like numpy's `rint`.
 */
export interface QuantizedWeight {
  readonly values: Int8Array;
  /** One scale for the tensor, or one per output channel (axis 0). */
  readonly scales: Float32Array;
}

const QMAX = 127;

/** The float32 scale for a range of ±`absMax`. */
export function symmetricScale(absMax: number): number {
  return absMax === 0 ? 1 : Math.fround(absMax / QMAX);
}

export function roundHalfEven(value: number): number {
  const rounded = Math.round(value);
  return Math.abs(value % 1) === 0.5 && rounded % 2 !== 0 ? rounded - 1 : rounded;
}

function quantizeRange(weights: Float32Array, out: Int8Array, start: number, end: number): number {
  let absMax = 0;
  for (let index = start; index < end; index++) absMax = Math.max(absMax, Math.abs(weights[index]!));
  const scale = symmetricScale(absMax);
  for (let index = start; index < end; index++) {
    out[index] = Math.max(-QMAX, Math.min(QMAX, roundHalfEven(weights[index]! / scale)));
  }
  return scale;
}

export function quantizePerTensor(weights: Float32Array): QuantizedWeight {
  const values = new Int8Array(weights.length);
  return { values, scales: Float32Array.of(quantizeRange(weights, values, 0, weights.length)) };
}

/** One scale per slice along axis 0 (a Conv weight's output channels). */
export function quantizePerChannel(weights: Float32Array, channels: number): QuantizedWeight {
  const values = new Int8Array(weights.length);
  const scales = new Float32Array(channels);
  const perChannel = weights.length / channels;
  for (let channel = 0; channel < channels; channel++) {
    scales[channel] = quantizeRange(weights, values, channel * perChannel, (channel + 1) * perChannel);
  }
  return { values, scales };
}
