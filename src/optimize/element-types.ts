import { DataType, getAttribute, isDefaultDomain, toNumber, type GraphProto, type NodeProto } from './onnx-graph.js';

const { INT64, BOOL, UINT8, INT32, FLOAT } = DataType;

/** Ops whose every output has one fixed element type, whatever their inputs. */
const FIXED_OUTPUT: Readonly<Record<string, number>> = {
  Shape: INT64,
  Size: INT64,
  NonZero: INT64,
  ArgMax: INT64,
  ArgMin: INT64,
  NonMaxSuppression: INT64,
  Equal: BOOL,
  Less: BOOL,
  LessOrEqual: BOOL,
  Greater: BOOL,
  GreaterOrEqual: BOOL,
  Not: BOOL,
  And: BOOL,
  Or: BOOL,
  Xor: BOOL,
  IsNaN: BOOL,
  IsInf: BOOL,
  MatMulInteger: INT32,
  ConvInteger: INT32,
  TfIdfVectorizer: FLOAT,
  ImageDecoder: UINT8,
};

/** Ops with several outputs of different types: the type of each output, `undefined` = the data type. */
const PER_OUTPUT: Readonly<Record<string, readonly (number | undefined)[]>> = {
  TopK: [undefined, INT64],
  MaxPool: [undefined, INT64],
  Unique: [undefined, INT64, INT64, INT64],
  Dropout: [undefined, BOOL],
  DynamicQuantizeLinear: [UINT8, FLOAT, UINT8],
  // Mean and inverse standard deviation are kept in the stash type, float32 by default.
  LayerNormalization: [undefined, FLOAT, FLOAT],
};

/** The input whose element type an op's (data) outputs take; 0 for everything not listed. */
const TYPE_SOURCE_INPUT: Readonly<Record<string, number>> = {
  Where: 1,
  CastLike: 1,
  OneHot: 2,
  DequantizeLinear: 1,
  QuantizeLinear: 2,
  QLinearConv: 7,
  QLinearMatMul: 7,
};

/** The `to`/`dtype`-style attribute that sets an op's output type, and its default. */
const TYPE_ATTRIBUTE: Readonly<Record<string, readonly [string, number | undefined]>> = {
  Cast: ['to', undefined],
  RandomNormal: ['dtype', FLOAT],
  RandomUniform: ['dtype', FLOAT],
  RandomNormalLike: ['dtype', undefined],
  RandomUniformLike: ['dtype', undefined],
  EyeLike: ['dtype', undefined],
  Bernoulli: ['dtype', undefined],
  Multinomial: ['dtype', INT32],
  MelWeightMatrix: ['output_datatype', FLOAT],
};

/**
 * The element type of every value in the graph: declared types (inputs, outputs, value_info,
 * initializers) first, then each node's outputs from its op's typing rule, in node order (ONNX
 * graphs are topologically sorted). A value whose type cannot be told is absent; converters
 * leave such values alone.
 */
export function inferElementTypes(graph: GraphProto): Map<string, number> {
  const types = new Map<string, number>();
  for (const info of [...(graph.input ?? []), ...(graph.output ?? []), ...(graph.valueInfo ?? [])]) {
    const elemType = info.type?.tensorType?.elemType;
    if (info.name && elemType) types.set(info.name, elemType);
  }
  for (const tensor of graph.initializer ?? []) {
    if (tensor.name && tensor.dataType) types.set(tensor.name, tensor.dataType);
  }
  for (const node of graph.node ?? []) {
    (node.output ?? []).forEach((output, index) => {
      if (!output || types.has(output)) return;
      const type = outputType(node, index, types);
      if (type !== undefined) types.set(output, type);
    });
  }
  return types;
}

function outputType(node: NodeProto, index: number, types: ReadonlyMap<string, number>): number | undefined {
  const op = node.opType ?? '';
  const inputType = (position: number): number | undefined => types.get(node.input?.[position] ?? '');
  if (!isDefaultDomain(node)) return inputType(0);
  if (op === 'Constant') return constantType(node);
  if (op === 'ConstantOfShape') return getAttribute(node, 'value')?.t?.dataType ?? FLOAT;
  const fixed = FIXED_OUTPUT[op];
  if (fixed !== undefined) return fixed;
  const perOutput = PER_OUTPUT[op]?.[index];
  if (perOutput !== undefined) return perOutput;
  const typeAttribute = TYPE_ATTRIBUTE[op];
  if (typeAttribute) {
    const [name, fallback] = typeAttribute;
    const attribute = getAttribute(node, name);
    if (attribute) return toNumber(attribute.i);
    return fallback ?? inputType(0);
  }
  if (op === 'QuantizeLinear' && !node.input?.[2]) return UINT8;
  return inputType(TYPE_SOURCE_INPUT[op] ?? 0);
}

function constantType(node: NodeProto): number | undefined {
  for (const attribute of node.attribute ?? []) {
    switch (attribute.name) {
      case 'value':
        return attribute.t?.dataType ?? undefined;
      case 'value_float':
      case 'value_floats':
        return FLOAT;
      case 'value_int':
      case 'value_ints':
        return INT64;
      case 'value_string':
      case 'value_strings':
        return DataType.STRING;
    }
  }
  return undefined;
}
