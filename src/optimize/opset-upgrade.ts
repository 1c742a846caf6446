import { ModelConversionError } from '../core/errors.js';
import {
  AttributeType,
  DataType,
  GraphNames,
  defaultOpset,
  float32Tensor,
  getAttribute,
  int64Tensor,
  isDefaultDomain,
  nodeLabel,
  toNumber,
  type AttributeProto,
  type GraphProto,
  type ModelProto,
  type NodeProto,
} from './onnx-graph.js';
import { inferElementTypes } from './element-types.js';

/** The oldest opset whose ops this upgrade knows: below 7, elementwise ops broadcast by attribute. */
const OLDEST_UPGRADABLE = 7;

/** Ops that moved attributes to inputs between opset 7 and 13: the attribute, the opset it moved in. */
const ATTRIBUTES_TO_INPUTS: Readonly<Record<string, readonly (readonly [string, number, 'int64' | 'float'])[]>> = {
  Slice: [
    ['starts', 10, 'int64'],
    ['ends', 10, 'int64'],
    ['axes', 10, 'int64'],
  ],
  TopK: [['k', 10, 'int64']],
  Clip: [
    ['min', 11, 'float'],
    ['max', 11, 'float'],
  ],
  Pad: [
    ['pads', 11, 'int64'],
    ['value', 11, 'float'],
  ],
  Squeeze: [['axes', 13, 'int64']],
  Unsqueeze: [['axes', 13, 'int64']],
  Split: [['split', 13, 'int64']],
  ReduceSum: [['axes', 13, 'int64']],
};

/** Ops whose old form this upgrade does not rewrite: why, and the opset from which their form is current. */
const NOT_UPGRADED: Readonly<Record<string, readonly [string, number]>> = {
  Upsample: ['Upsample was replaced by Resize in opset 10', Infinity],
  Resize: ['Resize changed its inputs and coordinate defaults in opset 11', 11],
};

/**
 * Raises the model's default opset to `target` (at most 13), rewriting the ops whose form
 * changed on the way: attributes that became inputs, Softmax-family axis semantics (coerced to
 * 2-D before 13), Dropout (an Identity at inference), Scatter (renamed ScatterElements).
 * DequantizeLinear with a per-channel axis needs opset 13, so int8 quantisation of older
 * exports (PaddleOCR's are opset 9) goes through here. Ops it cannot rewrite stop it with a
 * ModelConversionError rather than a model that would load with a different meaning.
 */
export function upgradeOpset(model: ModelProto & { graph: GraphProto }, target: number): void {
  const from = defaultOpset(model);
  if (from >= target) return;
  if (from < OLDEST_UPGRADABLE) {
    throw new ModelConversionError(`opset ${from} is older than ${OLDEST_UPGRADABLE}; int8 needs opset ${target}`);
  }
  const graph = model.graph;
  const names = new GraphNames(graph);
  const types = inferElementTypes(graph);
  const rewritten: NodeProto[] = [];
  for (const node of graph.node ?? []) {
    if (!isDefaultDomain(node)) {
      rewritten.push(node);
      continue;
    }
    const op = node.opType ?? '';
    const [refusal, currentFrom = 0] = NOT_UPGRADED[op] ?? [];
    if (refusal && from < currentFrom) {
      throw new ModelConversionError(`cannot upgrade ${nodeLabel(node)} to opset ${target}: ${refusal}`);
    }
    for (const [attribute, movedIn, kind] of ATTRIBUTES_TO_INPUTS[op] ?? []) {
      if (from >= movedIn) continue;
      // The moved attribute becomes a float32 tensor, which must match the data's type.
      if (kind === 'float' && types.get(node.input?.[0] ?? '') !== DataType.FLOAT) {
        throw new ModelConversionError(`cannot upgrade ${nodeLabel(node)}: ${op} of a tensor that is not float32`);
      }
      attributeToInput(graph, names, node, attribute, kind, ATTRIBUTES_TO_INPUTS[op]!.length);
    }
    if (op === 'BatchNormalization' && from < 9) removeSpatial(node);
    if (op === 'Scatter') node.opType = 'ScatterElements';
    if (op === 'Dropout') {
      rewritten.push(dropoutAsIdentity(node));
      continue;
    }
    if ((op === 'Softmax' || op === 'LogSoftmax' || op === 'Hardmax') && target >= 13) {
      rewritten.push(...softmaxOverCoercedAxis(node, names));
      continue;
    }
    rewritten.push(node);
  }
  graph.node = rewritten;
  for (const opset of model.opsetImport ?? []) if (!opset.domain || opset.domain === 'ai.onnx') opset.version = target;
  // Opset 13 needs IR version 7.
  if (toNumber(model.irVersion) < 7) model.irVersion = 7;
}

/**
 * Moves an attribute to the input position the newer opset gives it (after the data input,
 * in the order the table lists them), as a new initializer; a missing attribute leaves the
 * optional input empty.
 */
function attributeToInput(
  graph: GraphProto,
  names: GraphNames,
  node: NodeProto,
  attributeName: string,
  kind: 'int64' | 'float',
  movedCount: number,
): void {
  const order = ATTRIBUTES_TO_INPUTS[node.opType ?? '']!.findIndex(([name]) => name === attributeName);
  const inputs = [...(node.input ?? [])];
  while (inputs.length < 1 + movedCount) inputs.push('');
  const attribute = getAttribute(node, attributeName);
  if (attribute) {
    const name = names.fresh(`${node.name || node.opType || 'node'}_${attributeName}`);
    graph.initializer = [...(graph.initializer ?? []), attributeTensor(name, attribute, kind, node.opType ?? '')];
    inputs[1 + order] = name;
    node.attribute = (node.attribute ?? []).filter((other) => other !== attribute);
  }
  while (inputs.length > 1 && inputs[inputs.length - 1] === '') inputs.pop();
  node.input = inputs;
}

function attributeTensor(name: string, attribute: AttributeProto, kind: 'int64' | 'float', op: string) {
  if (kind === 'float') return float32Tensor(name, [], [attribute.f ?? 0]);
  const values = attribute.type === AttributeType.INT ? [toNumber(attribute.i)] : (attribute.ints ?? []).map(toNumber);
  // TopK's k is a one-element tensor; the other moved attributes are lists.
  return int64Tensor(name, [op === 'TopK' ? 1 : values.length], values);
}

function removeSpatial(node: NodeProto): void {
  const spatial = getAttribute(node, 'spatial');
  if (spatial && toNumber(spatial.i) === 0) {
    throw new ModelConversionError(`cannot upgrade ${nodeLabel(node)}: BatchNormalization with spatial=0`);
  }
  node.attribute = (node.attribute ?? []).filter(
    (attribute) => attribute.name !== 'spatial' && attribute.name !== 'is_test',
  );
}

/** Dropout does nothing at inference; its mask output is the one thing an Identity cannot give. */
function dropoutAsIdentity(node: NodeProto): NodeProto {
  if (node.output?.[1]) throw new ModelConversionError(`cannot upgrade ${nodeLabel(node)}: its mask output is used`);
  return {
    name: node.name ?? '',
    opType: 'Identity',
    input: [node.input?.[0] ?? ''],
    output: [node.output?.[0] ?? ''],
  };
}

/**
 * Before opset 13 Softmax (and LogSoftmax, Hardmax) flattened the input to 2-D at `axis` and
 * normalised over everything after it; from 13 it normalises one axis. Flatten → op over axis 1
 * → Reshape back to the input's shape keeps the old meaning for any rank.
 */
function softmaxOverCoercedAxis(node: NodeProto, names: GraphNames): NodeProto[] {
  const axisAttribute = getAttribute(node, 'axis');
  const axis = axisAttribute ? toNumber(axisAttribute.i) : 1;
  const input = node.input?.[0] ?? '';
  const output = node.output?.[0] ?? '';
  const label = node.name || node.opType || 'Softmax';
  const shape = names.fresh(`${label}_input_shape`);
  const flat = names.fresh(`${label}_flat`);
  const normalised = names.fresh(`${label}_flat_output`);
  const int = AttributeType.INT;
  return [
    { name: names.fresh(`${label}_shape`), opType: 'Shape', input: [input], output: [shape] },
    {
      name: names.fresh(`${label}_flatten`),
      opType: 'Flatten',
      input: [input],
      output: [flat],
      attribute: [{ name: 'axis', type: int, i: axis }],
    },
    { ...node, input: [flat], output: [normalised], attribute: [{ name: 'axis', type: int, i: 1 }] },
    { name: names.fresh(`${label}_reshape`), opType: 'Reshape', input: [normalised, shape], output: [output] },
  ];
}
