import { ModelConversionError } from '../core/errors.js';
import { inferElementTypes } from './element-types.js';
import { FULL_RANGE, quantizePerChannel, quantizePerTensor, REDUCED_RANGE } from './int8-weights.js';
import {
  AttributeType,
  DataType,
  GraphNames,
  decodeModel,
  constantTensors,
  encodeModel,
  getAttribute,
  isDefaultDomain,
  nodeLabel,
  rawTensor,
  readFloat32,
  removeUnreadConstants,
  toNumber,
  type GraphProto,
  type NodeProto,
  type TensorProto,
} from './onnx-graph.js';
import { upgradeOpset } from './opset-upgrade.js';

export interface Int8Options {
  /** Quantise Conv weights with one scale per output channel; without it Conv stays float32. */
  readonly perChannel: boolean;
}

export interface Int8Result {
  readonly model: Uint8Array;
  readonly quantizedNodes: readonly string[];
  readonly skippedNodes: readonly { name: string; reason: string }[];
}

/** DequantizeLinear with a per-channel axis (for Conv weights) needs opset 13. */
const TARGET_OPSET = 13;
const QUANTIZABLE = new Set(['MatMul', 'Gemm', 'Conv']);

/**
 * Dynamic int8 quantisation. Weights become int8 initializers (symmetric: one scale, zero
 * point 0; see int8-weights.ts; 7-bit for MatMul and Gemm, whose integer kernel saturates on
 * CPUs without VNNI); activations are quantised at run time.
 *
 * MatMul and Gemm: A → DynamicQuantizeLinear (uint8, scale and zero point per batch) →
 * MatMulInteger with the int8 weight → Cast → Mul by both scales (→ Add of Gemm's C). This is
 * the form onnxruntime's own `quantize_dynamic` writes, and the one its CPU provider fuses
 * into a single DynamicQuantizeMatMul kernel with or without a bias. The QDQ form
 * (DynamicQuantizeLinear → DequantizeLinear → MatMul ← DequantizeLinear) fuses only for a
 * MatMul without bias: onnxruntime first merges MatMul + Add into Gemm, and no integer kernel
 * matches a QDQ Gemm, so Linear layers would dequantise and run in float32.
 *
 * Conv (with `perChannel` and a constant 4-D weight): QDQ, the weight only — int8 with one
 * scale per output channel, read through DequantizeLinear(axis 0). onnxruntime has no fused
 * kernel for a Conv whose activation is quantised at run time; this cuts the weights' size to a
 * quarter, not the work.
 *
 * Models below opset 13 are upgraded to it first (opset-upgrade.ts).
 */
export function quantizeDynamicInt8(bytes: Uint8Array, options: Int8Options): Int8Result {
  const model = decodeModel(bytes);
  const graph = model.graph;
  if (!(graph.node ?? []).some(isQuantizable)) {
    throw new ModelConversionError('the model has no MatMul, Gemm or Conv to quantise');
  }
  upgradeOpset(model, TARGET_OPSET);

  const types = inferElementTypes(graph);
  const constants = constantTensors(graph);
  const writer = new QuantizedGraph(graph, constants);
  const quantizedNodes: string[] = [];
  const skippedNodes: { name: string; reason: string }[] = [];

  for (const node of graph.node ?? []) {
    const reason = isQuantizable(node) ? skipReason(node, constants, types, options) : 'not quantised';
    if (reason === undefined) {
      if (node.opType === 'Conv') writer.dequantizedConv(node);
      else writer.integerProduct(node);
      quantizedNodes.push(nodeLabel(node));
      continue;
    }
    if (isQuantizable(node)) skippedNodes.push({ name: nodeLabel(node), reason });
    writer.keep(node);
  }
  writer.finish();
  return { model: encodeModel(model), quantizedNodes, skippedNodes };
}

function isQuantizable(node: NodeProto): boolean {
  return isDefaultDomain(node) && QUANTIZABLE.has(node.opType ?? '');
}

function skipReason(
  node: NodeProto,
  constants: ReadonlyMap<string, TensorProto>,
  types: ReadonlyMap<string, number>,
  options: Int8Options,
): string | undefined {
  const weightName = node.input?.[1] ?? '';
  const weight = constants.get(weightName);
  if (!weight) {
    return types.get(weightName) === DataType.FLOAT || !types.has(weightName)
      ? `weight ${weightName} is computed at run time or fed as an input, not a constant`
      : `weight ${weightName} is not float32`;
  }
  const rank = (weight.dims ?? []).length;
  if (node.opType === 'Conv') {
    if (!options.perChannel) return 'Conv weights are quantised per output channel only, and per-channel is off';
    if (rank !== 4) return `Conv weight has rank ${rank}; per-channel quantisation takes 4-D (2-D convolution) weights`;
    return undefined;
  }
  if (rank !== 2) return `weight has rank ${rank}; the integer MatMul kernels take a 2-D weight`;
  if (constants.has(node.input?.[0] ?? '')) return 'both inputs are constants; onnxruntime folds the product at load';
  if (types.get(node.input?.[0] ?? '') !== DataType.FLOAT) return 'the activation input is not float32';
  if (node.opType === 'Gemm') {
    if (toNumber(getAttribute(node, 'transA')?.i) !== 0)
      return 'Gemm with transA: the integer product takes A as it is';
    const bias = node.input?.[2];
    if (bias && (getAttribute(node, 'beta')?.f ?? 1) !== 1 && !constants.has(bias)) {
      return 'Gemm with beta ≠ 1 and a computed C';
    }
  }
  return undefined;
}

interface QuantizedInitializers {
  readonly values: string;
  readonly scale: string;
  readonly zeroPoint: string;
}

/** Builds the new node list, adding int8 weights once each and dropping the float32 ones they replace. */
class QuantizedGraph {
  readonly #graph: GraphProto;
  readonly #constants: ReadonlyMap<string, TensorProto>;
  readonly #names: GraphNames;
  readonly #nodes: NodeProto[] = [];
  readonly #weights = new Map<string, QuantizedInitializers>();
  readonly #replaced = new Set<string>();

  constructor(graph: GraphProto, constants: ReadonlyMap<string, TensorProto>) {
    this.#graph = graph;
    this.#constants = constants;
    this.#names = new GraphNames(graph);
  }

  keep(node: NodeProto): void {
    this.#nodes.push(node);
  }

  /** MatMul or Gemm as DynamicQuantizeLinear → MatMulInteger → Cast → Mul (→ Add). */
  integerProduct(node: NodeProto): void {
    const label = nodeLabel(node);
    const [activation = '', weightName = '', bias = ''] = node.input ?? [];
    const gemm = node.opType === 'Gemm';
    const transposed = gemm && toNumber(getAttribute(node, 'transB')?.i) === 1;
    const alpha = gemm ? (getAttribute(node, 'alpha')?.f ?? 1) : 1;
    const weight = this.#weight(weightName, transposed ? 'transposed' : 'plain', alpha);
    const fresh = (part: string): string => this.#names.fresh(`${label}_${part}`);
    const [quantized, scale, zeroPoint, product, productFloat, combinedScale] = [
      'input_quantized',
      'input_scale',
      'input_zero_point',
      'product_int32',
      'product_float',
      'scale',
    ].map(fresh) as [string, string, string, string, string, string];
    const output = node.output?.[0] ?? '';
    const scaled = gemm && bias ? fresh('product') : output;
    this.#nodes.push(
      {
        name: fresh('DynamicQuantizeLinear'),
        opType: 'DynamicQuantizeLinear',
        input: [activation],
        output: [quantized, scale, zeroPoint],
      },
      {
        name: fresh('MatMulInteger'),
        opType: 'MatMulInteger',
        input: [quantized, weight.values, zeroPoint, weight.zeroPoint],
        output: [product],
      },
      {
        name: fresh('Cast'),
        opType: 'Cast',
        input: [product],
        output: [productFloat],
        attribute: [{ name: 'to', type: AttributeType.INT, i: DataType.FLOAT }],
      },
      { name: fresh('scale_Mul'), opType: 'Mul', input: [scale, weight.scale], output: [combinedScale] },
      { name: fresh('Mul'), opType: 'Mul', input: [productFloat, combinedScale], output: [scaled] },
    );
    if (gemm && bias)
      this.#nodes.push({
        name: fresh('Add'),
        opType: 'Add',
        input: [scaled, this.#gemmBias(node, bias)],
        output: [output],
      });
  }

  /** Conv reading its weight as int8 with one scale per output channel, through DequantizeLinear. */
  dequantizedConv(node: NodeProto): void {
    const label = nodeLabel(node);
    const weight = this.#weight(node.input?.[1] ?? '', 'per-channel', 1);
    const dequantized = this.#names.fresh(`${label}_weight_dequantized`);
    this.#nodes.push(
      {
        name: this.#names.fresh(`${label}_weight_DequantizeLinear`),
        opType: 'DequantizeLinear',
        input: [weight.values, weight.scale, weight.zeroPoint],
        output: [dequantized],
        attribute: [{ name: 'axis', type: AttributeType.INT, i: 0 }],
      },
      { ...node, input: [node.input?.[0] ?? '', dequantized, ...(node.input ?? []).slice(2)] },
    );
  }

  finish(): void {
    this.#graph.node = this.#nodes;
    removeUnreadConstants(this.#graph, this.#replaced);
  }

  /** The int8 initializers for a weight, made the first time a layout of it is asked for. */
  #weight(name: string, layout: 'plain' | 'transposed' | 'per-channel', alpha: number): QuantizedInitializers {
    const key = `${layout}:${alpha}:${name}`;
    const known = this.#weights.get(key);
    if (known) return known;
    const tensor = this.#constants.get(name)!;
    let dims = (tensor.dims ?? []).map(toNumber);
    let floats = readFloat32(tensor);
    if (layout === 'transposed') {
      floats = transpose(floats, dims[0]!, dims[1]!);
      dims = [dims[1]!, dims[0]!];
    }
    const { values, scales } =
      layout === 'per-channel'
        ? // Conv's weight is dequantised and run in float32: all 8 bits.
          quantizePerChannel(floats, dims[0]!, FULL_RANGE)
        : // MatMulInteger's: 7 (int8-weights.ts).
          quantizePerTensor(floats, REDUCED_RANGE);
    // Gemm's alpha scales the product; folded into the weight's scale it costs nothing at run time.
    const scaleValues = Array.from(scales, (scale) => Math.fround(scale * alpha));
    const scaleDims = layout === 'per-channel' ? [scales.length] : [];
    const initializers = {
      values: this.#names.fresh(`${name}_quantized`),
      scale: this.#names.fresh(`${name}_scale`),
      zeroPoint: this.#names.fresh(`${name}_zero_point`),
    };
    this.#graph.initializer = [
      ...(this.#graph.initializer ?? []),
      rawTensor(initializers.values, DataType.INT8, dims, new Uint8Array(values.buffer)),
      { name: initializers.scale, dataType: DataType.FLOAT, dims: scaleDims, floatData: scaleValues },
      rawTensor(initializers.zeroPoint, DataType.INT8, scaleDims, new Uint8Array(scales.length)),
    ];
    this.#weights.set(key, initializers);
    this.#replaced.add(name);
    return initializers;
  }

  /** Gemm's C, times beta when beta is not 1 (skipReason admits that only for a constant C). */
  #gemmBias(node: NodeProto, bias: string): string {
    const beta = getAttribute(node, 'beta')?.f ?? 1;
    if (beta === 1) return bias;
    const tensor = this.#constants.get(bias)!;
    const name = this.#names.fresh(`${bias}_times_beta`);
    const values = Array.from(readFloat32(tensor), (value) => value * beta);
    this.#graph.initializer = [
      ...(this.#graph.initializer ?? []),
      { name, dataType: DataType.FLOAT, dims: tensor.dims ?? [], floatData: values },
    ];
    return name;
  }
}

function transpose(values: Float32Array, rows: number, columns: number): Float32Array {
  const out = new Float32Array(values.length);
  for (let row = 0; row < rows; row++) {
    for (let column = 0; column < columns; column++) out[column * rows + row] = values[row * columns + column]!;
  }
  return out;
}
