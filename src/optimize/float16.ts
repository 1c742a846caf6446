import { ModelConversionError } from '../core/errors.js';
import { foldOverflowingVariances } from './batch-norm-variance.js';
import { inferElementTypes } from './element-types.js';
import { FLOAT16_BLOCKED_OPS } from './float16-block-list.js';
import { toFloat16Bytes } from './float16-bits.js';
import {
  AttributeType,
  DataType,
  GraphNames,
  decodeModel,
  encodeModel,
  getAttribute,
  isDefaultDomain,
  nodeLabel,
  readFloat32,
  toNumber,
  type AttributeProto,
  type GraphProto,
  type NodeProto,
  type TensorProto,
} from './onnx-graph.js';

// Plain numbers: element types are compared with numbers read from the model.
const FLOAT: number = DataType.FLOAT;
const FLOAT16: number = DataType.FLOAT16;

export interface Float16Options {
  /** Keep the graph's float32 inputs and outputs float32, with a Cast at each edge. */
  readonly keepIoTypes: boolean;
  /** Op types kept float32, added to FLOAT16_BLOCKED_OPS. */
  readonly fp32Ops: readonly string[];
}

export interface Float16Result {
  readonly model: Uint8Array;
  /** Float32 weights stored as float16: initializers and Constant nodes' tensors. */
  readonly convertedInitializers: number;
  /** Initializers and Constant tensors with a value beyond the float16 range (clamped to it). */
  readonly clampedInitializers: number;
  /** Nodes left computing in float32. */
  readonly keptFp32Nodes: readonly string[];
  readonly castsInserted: number;
}

/** Outputs that stay float32 when their node computes in float16 (the stash type's statistics). */
const FLOAT32_OUTPUTS: Readonly<Record<string, readonly number[]>> = { LayerNormalization: [1, 2] };

/** Attributes that name an op's output type; FLOAT becomes FLOAT16 in a converted node. */
const TYPE_ATTRIBUTES = new Set(['to', 'dtype']);

/**
 * Converts a float32 model to float16: weights, Constant and ConstantOfShape tensors, the types
 * of values, and Cast targets. Nodes of blocked ops stay float32; a Cast joins every edge where
 * a float16 and a float32 side meet, each value cast once per direction. The opset is kept.
 * BatchNormalization variances beyond float16 are folded into the scale first rather than clamped.
 */
export function convertToFloat16(bytes: Uint8Array, options: Float16Options): Float16Result {
  const model = decodeModel(bytes);
  const graph = model.graph;
  const blocked = new Set([...FLOAT16_BLOCKED_OPS.keys(), ...options.fp32Ops]);
  foldOverflowingVariances(graph, (opType) => blocked.has(opType));
  const nodes = graph.node ?? [];
  const types = inferElementTypes(graph);
  const isFloat32 = (name: string): boolean => name !== '' && types.get(name) === FLOAT;
  const consumers = consumersByValue(nodes);
  const outputNames = new Set((graph.output ?? []).map((output) => output.name ?? ''));
  const initializerNames = new Set((graph.initializer ?? []).map((tensor) => tensor.name ?? ''));

  const keptFp32 = new Set(nodes.filter((node) => !isDefaultDomain(node) || blocked.has(node.opType ?? '')));
  // A weight only blocked nodes read stays float32: converting it would only add a Cast and lose digits.
  const feedsOnlyFp32 = (name: string): boolean => {
    const readers = consumers.get(name) ?? [];
    return readers.length > 0 && !outputNames.has(name) && readers.every((reader) => keptFp32.has(reader));
  };
  for (const node of nodes) {
    if (node.opType === 'Constant' && isDefaultDomain(node) && feedsOnlyFp32(node.output?.[0] ?? '')) {
      keptFp32.add(node);
    }
  }
  const convertedInitializers = new Set(
    (graph.initializer ?? []).filter((tensor) => tensor.dataType === FLOAT && !feedsOnlyFp32(tensor.name ?? '')),
  );
  const convertedConstants = nodes.filter((node) => isFloatConstant(node) && !keptFp32.has(node)).length;
  if (convertedInitializers.size + convertedConstants === 0) {
    throw new ModelConversionError('the model has no float32 weights to convert to float16');
  }

  // The element type each float32 value has once converted, where it is produced.
  const produced = new Map<string, number>();
  for (const input of graph.input ?? []) {
    const name = input.name ?? '';
    if (isFloat32(name) && !initializerNames.has(name)) produced.set(name, options.keepIoTypes ? FLOAT : FLOAT16);
  }
  for (const tensor of graph.initializer ?? []) {
    if (tensor.dataType === FLOAT) produced.set(tensor.name ?? '', convertedInitializers.has(tensor) ? FLOAT16 : FLOAT);
  }
  for (const node of nodes) {
    const float32Outputs = FLOAT32_OUTPUTS[node.opType ?? ''] ?? [];
    (node.output ?? []).forEach((output, index) => {
      if (!isFloat32(output)) return;
      produced.set(output, keptFp32.has(node) || float32Outputs.includes(index) ? FLOAT : FLOAT16);
    });
  }

  const names = new GraphNames(graph);
  const edges = new CastEdges(names, nodes);
  renameMismatchedOutputs(graph, options.keepIoTypes ? FLOAT : FLOAT16, produced, edges, names);
  for (const node of nodes) {
    const wanted = keptFp32.has(node) ? FLOAT : FLOAT16;
    node.input = (node.input ?? []).map((name) => {
      const type = produced.get(name);
      return type === undefined || type === wanted ? name : edges.cast(name, wanted);
    });
  }

  let clamped = 0;
  for (const tensor of convertedInitializers) clamped += toFloat16Tensor(tensor);
  for (const node of nodes) if (!keptFp32.has(node)) clamped += convertAttributes(node);
  for (const info of [...(graph.input ?? []), ...(graph.valueInfo ?? [])]) {
    const type = produced.get(info.name ?? '');
    if (type !== undefined && info.type?.tensorType) info.type.tensorType.elemType = type;
  }
  graph.node = edges.placeAll(nodes);

  return {
    model: encodeModel(model),
    convertedInitializers: convertedInitializers.size + convertedConstants,
    clampedInitializers: clamped,
    keptFp32Nodes: nodes.filter((node) => keptFp32.has(node)).map(nodeLabel),
    castsInserted: edges.count,
  };
}

function consumersByValue(nodes: readonly NodeProto[]): Map<string, NodeProto[]> {
  const consumers = new Map<string, NodeProto[]>();
  for (const node of nodes) {
    for (const name of node.input ?? []) {
      if (!name) continue;
      const readers = consumers.get(name);
      if (readers) readers.push(node);
      else consumers.set(name, [node]);
    }
  }
  return consumers;
}

function isFloatConstant(node: NodeProto): boolean {
  if (node.opType !== 'Constant' || !isDefaultDomain(node)) return false;
  const value = getAttribute(node, 'value');
  return (
    value?.t?.dataType === FLOAT || Boolean(getAttribute(node, 'value_float') ?? getAttribute(node, 'value_floats'))
  );
}

/**
 * A graph output whose producer computes in the other precision is renamed inside the graph
 * and reached through a Cast to the output's own name, so callers see the name they expect.
 */
function renameMismatchedOutputs(
  graph: GraphProto,
  outputType: number,
  produced: Map<string, number>,
  edges: CastEdges,
  names: GraphNames,
): void {
  for (const output of graph.output ?? []) {
    const name = output.name ?? '';
    const type = produced.get(name);
    if (type === undefined) continue;
    if (output.type?.tensorType) output.type.tensorType.elemType = outputType;
    if (type === outputType) continue;
    const inner = names.fresh(`${name}_${type === FLOAT16 ? 'fp16' : 'fp32'}`);
    renameValue(graph, name, inner);
    edges.renamed(name, inner);
    produced.set(inner, type);
    produced.delete(name);
    edges.castTo(inner, outputType, name);
  }
}

function renameValue(graph: GraphProto, from: string, to: string): void {
  const rename = (name: string): string => (name === from ? to : name);
  for (const node of graph.node ?? []) {
    node.input = (node.input ?? []).map(rename);
    node.output = (node.output ?? []).map(rename);
  }
  for (const tensor of graph.initializer ?? []) tensor.name = rename(tensor.name ?? '');
  for (const info of graph.valueInfo ?? []) info.name = rename(info.name ?? '');
}

/** The Casts added to the graph, each placed right after the node that produces its input. */
class CastEdges {
  readonly #names: GraphNames;
  readonly #producer = new Map<string, NodeProto>();
  readonly #byEdge = new Map<string, string>();
  readonly #after = new Map<NodeProto | undefined, NodeProto[]>();
  count = 0;

  constructor(names: GraphNames, nodes: readonly NodeProto[]) {
    this.#names = names;
    for (const node of nodes) for (const output of node.output ?? []) this.#producer.set(output, node);
  }

  renamed(from: string, to: string): void {
    const producer = this.#producer.get(from);
    if (producer) this.#producer.set(to, producer);
  }

  /** The name of `value` cast to `type`, adding the Cast the first time it is asked for. */
  cast(value: string, type: number): string {
    const key = `${type}:${value}`;
    let castName = this.#byEdge.get(key);
    if (castName === undefined) {
      castName = this.#names.fresh(`${value}_${type === FLOAT16 ? 'fp16' : 'fp32'}`);
      this.castTo(value, type, castName);
      this.#byEdge.set(key, castName);
    }
    return castName;
  }

  castTo(value: string, type: number, castName: string): void {
    const producer = this.#producer.get(value);
    const cast: NodeProto = {
      name: this.#names.fresh(`Cast_${castName}`),
      opType: 'Cast',
      input: [value],
      output: [castName],
      attribute: [{ name: 'to', type: AttributeType.INT, i: type }],
    };
    this.#after.set(producer, [...(this.#after.get(producer) ?? []), cast]);
    this.#producer.set(castName, cast);
    this.count++;
  }

  /** The graph's nodes with the Casts in place: those of inputs and weights first. */
  placeAll(nodes: readonly NodeProto[]): NodeProto[] {
    const placed: NodeProto[] = [];
    const place = (node: NodeProto | undefined): void => {
      for (const cast of this.#after.get(node) ?? []) {
        placed.push(cast);
        place(cast);
      }
    };
    place(undefined);
    for (const node of nodes) {
      placed.push(node);
      place(node);
    }
    return placed;
  }
}

function toFloat16Tensor(tensor: TensorProto): number {
  const { bytes, clamped } = toFloat16Bytes(readFloat32(tensor));
  tensor.dataType = FLOAT16;
  tensor.floatData = [];
  tensor.rawData = bytes;
  return clamped > 0 ? 1 : 0;
}

/** Float tensors and type attributes of a node that now computes in float16; returns the clamped tensors. */
function convertAttributes(node: NodeProto): number {
  let clamped = 0;
  const attributes: AttributeProto[] = [];
  for (const attribute of node.attribute ?? []) {
    if (attribute.t?.dataType === FLOAT) clamped += toFloat16Tensor(attribute.t);
    if (TYPE_ATTRIBUTES.has(attribute.name ?? '') && toNumber(attribute.i) === FLOAT) attribute.i = FLOAT16;
    if (node.opType === 'Constant' && (attribute.name === 'value_float' || attribute.name === 'value_floats')) {
      const values = attribute.name === 'value_float' ? [attribute.f ?? 0] : (attribute.floats ?? []);
      const dims = attribute.name === 'value_float' ? [] : [values.length];
      const tensor: TensorProto = { dataType: FLOAT, dims, floatData: values };
      clamped += toFloat16Tensor(tensor);
      attributes.push({ name: 'value', type: AttributeType.TENSOR, t: tensor });
      continue;
    }
    attributes.push(attribute);
  }
  // Without a value ConstantOfShape fills float32 zeros; a float16 node must say float16.
  if (node.opType === 'ConstantOfShape' && !getAttribute(node, 'value')) {
    attributes.push({
      name: 'value',
      type: AttributeType.TENSOR,
      t: { dataType: FLOAT16, dims: [1], rawData: new Uint8Array(2) },
    });
  }
  node.attribute = attributes;
  return clamped;
}
