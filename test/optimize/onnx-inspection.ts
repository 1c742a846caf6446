import onnxProto from 'onnx-proto';
import * as ort from 'onnxruntime-node';

/** Reading converted models back in tests: types, nodes, and answers from a real session. */
const { onnx } = onnxProto;

export const { FLOAT, FLOAT16, INT8, INT64 } = onnx.TensorProto.DataType;

export function decode(bytes: Uint8Array): onnxProto.onnx.ModelProto & { graph: onnxProto.onnx.GraphProto } {
  return onnx.ModelProto.decode(bytes) as onnxProto.onnx.ModelProto & { graph: onnxProto.onnx.GraphProto };
}

export function toNumber(value: number | { toNumber(): number } | null | undefined): number {
  return typeof value === 'number' ? value : (value?.toNumber() ?? 0);
}

/** Element type of every declared value: inputs, outputs and value_info. */
export function declaredTypes(graph: onnxProto.onnx.IGraphProto): Record<string, number> {
  const types: Record<string, number> = {};
  for (const info of [...(graph.input ?? []), ...(graph.valueInfo ?? []), ...(graph.output ?? [])]) {
    types[info.name ?? ''] = info.type?.tensorType?.elemType ?? 0;
  }
  return types;
}

export function initializerTypes(graph: onnxProto.onnx.IGraphProto): Record<string, number> {
  return Object.fromEntries((graph.initializer ?? []).map((tensor) => [tensor.name ?? '', tensor.dataType ?? 0]));
}

/** Each node as `Op(inputs)->outputs`, Casts with their target: `Cast:10(x)->x_fp16`. */
export function nodeSummary(graph: onnxProto.onnx.IGraphProto): string[] {
  return (graph.node ?? []).map((node) => {
    const to = node.opType === 'Cast' ? `:${toNumber(node.attribute?.find((a) => a.name === 'to')?.i)}` : '';
    return `${node.opType}${to}(${(node.input ?? []).join(',')})->${(node.output ?? []).join(',')}`;
  });
}

export function tensorNamed(graph: onnxProto.onnx.IGraphProto, name: string): onnxProto.onnx.ITensorProto {
  const tensor = (graph.initializer ?? []).find((candidate) => candidate.name === name);
  if (!tensor) throw new Error(`no initializer ${name}`);
  return tensor;
}

export function int8Values(tensor: onnxProto.onnx.ITensorProto): number[] {
  const raw = tensor.rawData ?? new Uint8Array();
  return Array.from(new Int8Array(raw.buffer, raw.byteOffset, raw.byteLength));
}

/** Runs a model once and returns each output's values as plain numbers. */
export async function runModel(
  bytes: Uint8Array,
  feeds: Record<string, ort.Tensor>,
): Promise<Record<string, { type: string; values: number[] }>> {
  const session = await ort.InferenceSession.create(bytes, { logSeverityLevel: 3 });
  try {
    const outputs = await session.run(feeds);
    return Object.fromEntries(
      Object.entries(outputs).map(([name, tensor]) => [
        name,
        { type: tensor.type, values: Array.from(tensor.data as ArrayLike<number | bigint>, Number) },
      ]),
    );
  } finally {
    await session.release();
  }
}

export function maxAbsDifference(a: readonly number[], b: readonly number[]): number {
  if (a.length !== b.length) throw new Error(`lengths differ: ${a.length} vs ${b.length}`);
  return a.reduce((max, value, index) => Math.max(max, Math.abs(value - b[index]!)), 0);
}

/** A deterministic pseudo-random float32 tensor in [-1, 1), so failures reproduce. */
export function randomTensor(dims: readonly number[], seed: number): ort.Tensor {
  let state = seed >>> 0;
  const size = dims.reduce((count, dim) => count * dim, 1);
  const data = new Float32Array(size);
  for (let index = 0; index < size; index++) {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0;
    data[index] = state / 2 ** 31 - 1;
  }
  return new ort.Tensor('float32', data, [...dims]);
}

export function argmax(values: readonly number[]): number {
  return values.reduce((best, value, index) => (value > values[best]! ? index : best), 0);
}
