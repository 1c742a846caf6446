/**
 * Ops `convertToFloat16` keeps in float32, with Casts around them, and why. Two reasons put an
 * op here: the ONNX schema (at the opsets exporters use) has no float16 for one of its float
 * inputs or outputs, so a float16 node would not load; or the op picks indices or positions
 * from float values, where float16 rounding changes the answer, not just its last digits.
 * Ops that merely lack a float16 kernel in onnxruntime's CPU provider are not listed: onnxruntime
 * inserts its own float32 Casts around those at load (its InsertCastTransformer), and the GPU
 * providers do have kernels. Ops outside the default domain (ai.onnx.ml, com.microsoft) are
 * always kept float32: their kernels declare their own type lists.
 * Based on the block list of onnxconverter-common's float16 converter, narrowed to the reasons above.
 */
export const FLOAT16_BLOCKED_OPS: ReadonlyMap<string, string> = new Map([
  ['Range', 'no float16 in the schema (opset 11)'],
  ['NonMaxSuppression', 'boxes and scores are float32-only in the schema; box overlap decides which boxes stay'],
  ['Resize', 'the scales input is float32-only in the schema; sampling positions need float32'],
  ['Upsample', 'the scales input is float32-only in the schema'],
  ['CumSum', 'float16 only from opset 14; long running sums lose precision in float16'],
  ['TopK', 'picks indices: float16 rounding makes ties and reorders the top k'],
  ['RoiAlign', 'box coordinates need float32 precision; onnxruntime CPU has float and double kernels only'],
  ['Celu', 'float32-only in the schema (opset 12)'],
  ['IsInf', 'float16 only from opset 20'],
  ['QuantizeLinear', 'scales are float32-only before opset 19'],
  ['DequantizeLinear', 'scales are float32-only before opset 19'],
  ['DynamicQuantizeLinear', 'float32-only in the schema'],
  ['TfIdfVectorizer', 'its output is float32-only in the schema'],
]);
