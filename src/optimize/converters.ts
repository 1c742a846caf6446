import type { ModelPrecision } from '../archive/manifest.js';

export interface ConversionOptions {
  readonly keepIoTypes: boolean;
  readonly fp32Ops: readonly string[];
}

/** A converted model and the one-line account pack prints of what changed. */
export interface Conversion {
  readonly model: Uint8Array;
  readonly summary: string;
}

export type Converter = (model: Uint8Array, precision: ModelPrecision, options: ConversionOptions) => Conversion;

/** The converter `pack --precision` runs; each is imported only when asked for. */
export async function loadConverter(precision: ModelPrecision): Promise<Converter> {
  if (precision === 'fp16') {
    const { convertToFloat16 } = await import('./float16.js');
    return (model, _precision, options) => {
      const result = convertToFloat16(model, options);
      const kept = result.keptFp32Nodes.length;
      return {
        model: result.model,
        summary: `${result.convertedInitializers} initializers to float16 (${result.clampedInitializers} clamped to the float16 range), ${kept} node${kept === 1 ? '' : 's'} kept float32, ${result.castsInserted} Casts inserted`,
      };
    };
  }
  const { quantizeDynamicInt8 } = await import('./int8.js');
  return (model) => {
    // Per-channel scales keep Conv weights accurate: one scale per output channel, not per tensor.
    const result = quantizeDynamicInt8(model, { perChannel: true });
    const skipped = result.skippedNodes.map(
      (node: { name: string; reason: string }) => `${node.name} (${node.reason})`,
    );
    const shown = skipped.length > 3 ? [...skipped.slice(0, 3), '…'] : skipped;
    return {
      model: result.model,
      summary: `${result.quantizedNodes.length} nodes quantised to int8${skipped.length > 0 ? `, ${skipped.length} skipped: ${shown.join(', ')}` : ''}`,
    };
  };
}
