import type ort from 'onnxruntime-node';
import type { CompleteModelConfig } from '../config/model-config.js';
import { loadTokenizer } from '../handlers/text-tokens.js';
import { servedMaxContext } from './context-probe.js';
import { cacheBytesPerToken, decoderLayout } from './decoder-layout.js';
import { GenerationEngine } from './generation-engine.js';
import { Grammars } from './grammar.js';
import { servedGenerationOptions } from './generation-options.js';
import { probePadding, type PaddingVerdict } from './padding-probe.js';
import { createSession, type GraphSignature } from './session.js';
import { DEFAULT_SIMULATED_DEVICE, SIMULATED_DEVICE } from './simulated-device.js';
import { simulatedStepPacer } from './step-pacer.js';

/** What running the decoder at load found, which the requests' side needs as well. */
export interface DecoderFindings {
  readonly padding: PaddingVerdict;
  /** generation.max_context as served: the config's, or what the model holds up to the default. */
  readonly maxContext: number;
  /** Set when the config asked more context than the model holds: served with what it holds. */
  readonly contextWarning?: string;
}

/**
 * The generation engine of a text-generation instance, beside its session: the model's
 * layout and tokenizer read, how it can be batched and how long a context it holds probed
 * (which also warms it up), and on the simulated device each step held to its cost.
 */
export async function openGenerationEngine(
  session: ort.InferenceSession,
  config: CompleteModelConfig,
  configSource: string,
  tokenizerJson: string | undefined,
  device: string,
): Promise<{ engine: GenerationEngine; decoder: DecoderFindings }> {
  const layout = decoderLayout(config.inputs, config.outputs);
  const { tokenizer } = loadTokenizer(tokenizerJson, 'text-generation');
  const padding = await probePadding(session, layout);
  const { maxContext, over } = await servedMaxContext(session, layout, config.generation?.max_context);
  const pace =
    device === SIMULATED_DEVICE ? simulatedStepPacer(config.simulated_device ?? DEFAULT_SIMULATED_DEVICE) : undefined;
  const options = servedGenerationOptions(config.generation, maxContext);
  // A vocabulary the export left symbolic is read by the grammars from the tokenizer.
  const vocab = config.outputs.find((output) => output.name === layout.logits)?.shape[2] ?? -1;
  const engine = new GenerationEngine(
    session,
    layout,
    tokenizer,
    options,
    padding.batching,
    pace,
    new Grammars(tokenizerJson as string, vocab > 0 ? vocab : undefined, options.eos_token_ids),
  );
  return {
    engine,
    decoder: {
      padding,
      maxContext,
      ...(over ? { contextWarning: `${configSource}: ${over}; serving max_context ${maxContext}` } : {}),
    },
  };
}

/** How a text-generation archive's decoder will be batched, and what a token costs in its cache: for `inspect`. */
export async function describeDecoder(
  model: Uint8Array,
  signature: GraphSignature,
  source: string,
): Promise<PaddingVerdict & { readonly cacheBytesPerToken: number }> {
  const layout = decoderLayout(signature.inputs, signature.outputs);
  const session = await createSession(
    model,
    { runtime: { intra_op_threads: 1, inter_op_threads: 1, graph_optimization_level: 'all' } },
    source,
  );
  try {
    return { ...(await probePadding(session, layout)), cacheBytesPerToken: cacheBytesPerToken(layout) };
  } finally {
    await session.release();
  }
}
