import onnxProto from 'onnx-proto';
import { ModelConversionError } from '../core/errors.js';

/** The generated ONNX protobuf classes; the converters edit decoded messages in place. */
export const { onnx } = onnxProto;
export type ModelProto = onnxProto.onnx.ModelProto;
export type GraphProto = onnxProto.onnx.IGraphProto;
export type NodeProto = onnxProto.onnx.INodeProto;
export type TensorProto = onnxProto.onnx.ITensorProto;
export type AttributeProto = onnxProto.onnx.IAttributeProto;
export type ValueInfoProto = onnxProto.onnx.IValueInfoProto;

export const DataType = onnx.TensorProto.DataType;
export const AttributeType = onnx.AttributeProto.AttributeType;

/** An int64 field as protobufjs decodes it (a number or a Long), as a JS number. */
export function toNumber(value: number | { toNumber(): number } | null | undefined): number {
  if (value === null || value === undefined) return 0;
  return typeof value === 'number' ? value : value.toNumber();
}

/** A decoded model with a graph, or a ModelConversionError saying why not. */
export function decodeModel(bytes: Uint8Array): ModelProto & { graph: GraphProto } {
  let model: ModelProto;
  try {
    model = onnx.ModelProto.decode(bytes);
  } catch (error) {
    throw new ModelConversionError(`the model is not a readable ONNX file: ${(error as Error).message}`, {
      cause: error,
    });
  }
  const { graph } = model;
  if (!graph || (graph.node ?? []).length === 0) throw new ModelConversionError('the ONNX file holds no graph');
  if (findSubgraph(graph)) {
    throw new ModelConversionError(
      `node ${nodeLabel(findSubgraph(graph)!)} has a subgraph (If, Loop or Scan); control flow is not converted`,
    );
  }
  return model as ModelProto & { graph: GraphProto };
}

export function encodeModel(model: ModelProto): Uint8Array {
  return onnx.ModelProto.encode(model).finish();
}

function findSubgraph(graph: GraphProto): NodeProto | undefined {
  return (graph.node ?? []).find((node) =>
    (node.attribute ?? []).some((attribute) => attribute.g || (attribute.graphs ?? []).length > 0),
  );
}

/** The model's version of the default (ai.onnx) operator set. */
export function defaultOpset(model: ModelProto): number {
  const entry = (model.opsetImport ?? []).find((opset) => !opset.domain || opset.domain === 'ai.onnx');
  return toNumber(entry?.version);
}

export function isDefaultDomain(node: NodeProto): boolean {
  return !node.domain || node.domain === 'ai.onnx';
}

/** How a node is named in reports: its name, or its op type and first output when it has none. */
export function nodeLabel(node: NodeProto): string {
  return node.name || `${node.opType ?? '?'}(${node.output?.[0] ?? ''})`;
}

export function getAttribute(node: NodeProto, name: string): AttributeProto | undefined {
  return (node.attribute ?? []).find((attribute) => attribute.name === name);
}

export function tensorElementCount(tensor: TensorProto): number {
  return (tensor.dims ?? []).reduce<number>((count, dim) => count * toNumber(dim), 1);
}

/** A float32 tensor's values, from `float_data` or little-endian `raw_data`. */
export function readFloat32(tensor: TensorProto): Float32Array {
  if (tensor.dataLocation === onnx.TensorProto.DataLocation.EXTERNAL) {
    throw new ModelConversionError(`tensor ${tensor.name ?? ''} keeps its data in an external file`);
  }
  const raw = tensor.rawData;
  if (raw && raw.length > 0) {
    const values = new Float32Array(raw.length / 4);
    const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
    for (let index = 0; index < values.length; index++) values[index] = view.getFloat32(index * 4, true);
    return values;
  }
  return Float32Array.from(tensor.floatData ?? []);
}

/** A tensor of the given element type with little-endian `raw_data`. */
export function rawTensor(name: string, dataType: number, dims: readonly number[], bytes: Uint8Array): TensorProto {
  return { name, dataType, dims: [...dims], rawData: bytes };
}

export function float32Tensor(name: string, dims: readonly number[], values: ArrayLike<number>): TensorProto {
  return { name, dataType: DataType.FLOAT, dims: [...dims], floatData: Array.from(values) };
}

export function int64Tensor(name: string, dims: readonly number[], values: readonly number[]): TensorProto {
  return { name, dataType: DataType.INT64, dims: [...dims], int64Data: [...values] };
}

/** Float32 tensors fixed in the graph: initializers that are not also inputs, and Constant nodes' values. */
export function constantTensors(graph: GraphProto): Map<string, TensorProto> {
  const inputs = new Set((graph.input ?? []).map((input) => input.name));
  const constants = new Map<string, TensorProto>();
  for (const tensor of graph.initializer ?? []) {
    if (tensor.dataType === DataType.FLOAT && !inputs.has(tensor.name)) constants.set(tensor.name ?? '', tensor);
  }
  for (const node of graph.node ?? []) {
    const value = node.opType === 'Constant' && isDefaultDomain(node) ? getAttribute(node, 'value')?.t : undefined;
    if (value?.dataType === DataType.FLOAT) constants.set(node.output?.[0] ?? '', value);
  }
  return constants;
}

/** Drops the initializers and Constant nodes among `names` that no node or output reads any more. */
export function removeUnreadConstants(graph: GraphProto, names: ReadonlySet<string>): void {
  const read = new Set<string>((graph.output ?? []).map((output) => output.name ?? ''));
  for (const node of graph.node ?? []) for (const input of node.input ?? []) read.add(input);
  const unread = (name: string): boolean => names.has(name) && !read.has(name);
  graph.initializer = (graph.initializer ?? []).filter((tensor) => !unread(tensor.name ?? ''));
  graph.node = (graph.node ?? []).filter((node) => node.opType !== 'Constant' || !unread(node.output?.[0] ?? ''));
}

/** Hands out value and node names not yet used in the graph. */
export class GraphNames {
  readonly #used = new Set<string>();

  constructor(graph: GraphProto) {
    for (const info of [...(graph.input ?? []), ...(graph.output ?? []), ...(graph.valueInfo ?? [])]) {
      this.#used.add(info.name ?? '');
    }
    for (const tensor of graph.initializer ?? []) this.#used.add(tensor.name ?? '');
    for (const node of graph.node ?? []) {
      this.#used.add(node.name ?? '');
      for (const name of [...(node.input ?? []), ...(node.output ?? [])]) this.#used.add(name);
    }
  }

  fresh(base: string): string {
    let name = base;
    for (let suffix = 1; this.#used.has(name); suffix++) name = `${base}_${suffix}`;
    this.#used.add(name);
    return name;
  }
}
