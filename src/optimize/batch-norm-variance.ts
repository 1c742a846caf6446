import { FLOAT16_MAX } from './float16-bits.js';
import {
  GraphNames,
  constantTensors,
  float32Tensor,
  getAttribute,
  isDefaultDomain,
  readFloat32,
  removeUnreadConstants,
  type GraphProto,
} from './onnx-graph.js';

/**
 * Rewrites BatchNormalization nodes whose running variance exceeds float16 (PaddleOCR's text
 * detector has variances near 1e8): clamping them to 65504 would scale the channel up ~40×.
 * `scale / sqrt(var + eps)` is folded into the scale and the variance set to `1 - eps`, so
 * `var + eps` is 1 and the node computes the same function with every parameter in range.
 * Nodes `skip` says stay float32 are left as they are. Returns how many nodes it rewrote.
 */
export function foldOverflowingVariances(graph: GraphProto, skip: (opType: string) => boolean): number {
  if (skip('BatchNormalization')) return 0;
  const constants = constantTensors(graph);
  const names = new GraphNames(graph);
  const replaced = new Set<string>();
  let rewritten = 0;
  for (const node of graph.node ?? []) {
    if (node.opType !== 'BatchNormalization' || !isDefaultDomain(node) || (node.output ?? []).length > 1) continue;
    const [input = '', scaleName = '', bias = '', mean = '', varianceName = ''] = node.input ?? [];
    const [scaleTensor, varianceTensor] = [constants.get(scaleName), constants.get(varianceName)];
    if (!scaleTensor || !varianceTensor) continue;
    const variance = readFloat32(varianceTensor);
    if (!variance.some((value) => Math.abs(value) > FLOAT16_MAX)) continue;
    const epsilon = getAttribute(node, 'epsilon')?.f ?? 1e-5;
    const scale = readFloat32(scaleTensor);
    const foldedScale = names.fresh(`${scaleName}_over_stddev`);
    const unitVariance = names.fresh(`${varianceName}_unit`);
    graph.initializer = [
      ...(graph.initializer ?? []),
      float32Tensor(
        foldedScale,
        [scale.length],
        Array.from(scale, (value, channel) => value / Math.sqrt(variance[channel]! + epsilon)),
      ),
      float32Tensor(unitVariance, [variance.length], new Array<number>(variance.length).fill(1 - epsilon)),
    ];
    node.input = [input, foldedScale, bias, mean, unitVariance];
    replaced.add(scaleName).add(varianceName);
    rewritten++;
  }
  removeUnreadConstants(graph, replaced);
  return rewritten;
}
