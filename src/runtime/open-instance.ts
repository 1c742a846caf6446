import type ort from 'onnxruntime-node';
import type { CompleteModelConfig, ModelConfig } from '../config/model-config.js';
import { reconcileWithModel } from './reconcile.js';
import { loadHandler } from '../handlers/load.js';
import { createHandlerContext, runBatch } from '../handlers/lifecycle.js';
import type { Handler, HandlerContext } from '../handlers/types.js';
import { createDeviceSession, readSignature } from './session.js';
import { syntheticFeeds } from '../handlers/ort-tensors.js';
import { ModelLoadError } from '../core/errors.js';
import { DEFAULT_SIMULATED_DEVICE, SIMULATED_DEVICE, SimulatedSession } from './simulated-device.js';
import type { GenerationEngine } from './generation-engine.js';
import { openGenerationEngine, type DecoderFindings } from './open-generation.js';

/** Everything one instance needs, as plain data so it can cross into a worker thread. */
export interface InstanceSpec {
  readonly modelName: string;
  readonly modelVersion: string;
  readonly modelPath: string;
  /** Names the model file in errors: `archive!model.onnx`. */
  readonly modelSource: string;
  /** A built-in handler name or an absolute handler file path. */
  readonly handler: string;
  readonly config: ModelConfig;
  /** Names the config in errors: `archive!model-config.yaml`. */
  readonly configSource: string;
  readonly labels: readonly string[] | undefined;
  /** The text of the config's text.tokenizer_file (a tokenizer.json), when it names one. */
  readonly tokenizer?: string;
  readonly device: string;
}

export interface OpenedInstance {
  readonly session: ort.InferenceSession;
  /** Where it runs: the spec's device, or what `auto` picked. */
  readonly device: string;
  readonly deviceNote?: string;
  readonly handler: Handler;
  readonly context: HandlerContext;
  readonly config: CompleteModelConfig;
  /** A text-generation instance's engine, which steps the session itself. */
  readonly generation?: { readonly engine: GenerationEngine; readonly decoder: DecoderFindings };
}

/** Told when the handler's import starts and ends, so a thread outside can time it. */
export interface HandlerImportWatch {
  started(): void;
  finished(): void;
}

/**
 * Opens the session on its device, checks the config against the real model, imports the
 * handler, runs its initialize hook and warms up every preferred batch size.
 */
export async function openInstance(spec: InstanceSpec, watch?: HandlerImportWatch): Promise<OpenedInstance> {
  const {
    session: opened,
    device,
    note,
  } = await createDeviceSession(
    spec.modelPath,
    { runtime: spec.config.runtime, device: spec.device },
    spec.modelSource,
  );
  let session = opened;
  try {
    const config = reconcileWithModel(spec.config, readSignature(opened, spec.modelSource), spec.configSource);
    watch?.started();
    const handler = await loadHandler(spec.handler);
    watch?.finished();
    // A generator on `sim` runs the real decoder and holds each step to its cost (step-pacer.ts).
    if (device === SIMULATED_DEVICE && !handler.decodesSteps) {
      // Handlers call run() (and read the names); the real session is opened only for the signature.
      session = new SimulatedSession(
        opened,
        config.simulated_device ?? DEFAULT_SIMULATED_DEVICE,
        config.outputs,
      ) as unknown as ort.InferenceSession;
    }
    const context = createHandlerContext({
      modelName: spec.modelName,
      modelVersion: spec.modelVersion,
      config,
      session,
      ...(spec.labels ? { labels: spec.labels } : {}),
      ...(spec.tokenizer !== undefined ? { tokenizer: spec.tokenizer } : {}),
    });
    await handler.initialize?.(context);
    // A decoder's cache inputs cannot be made up from zeros; its engine's probes run it instead.
    const generation = handler.decodesSteps
      ? await openGenerationEngine(session, config, spec.configSource, spec.tokenizer, device)
      : undefined;
    if (config.warmup && !generation) await warmUp(handler, context, config);
    return {
      session,
      device,
      ...(note ? { deviceNote: note } : {}),
      handler,
      context,
      config,
      ...(generation ? { generation } : {}),
    };
  } catch (error) {
    await session.release();
    throw error;
  }
}

/**
 * The whole handler lifecycle (preprocess → forward pass → postprocess) at batch size 1 and every
 * preferred size, on zeros, before the instance reports ready: the first real requests don't
 * pay for lazy initialization (much larger on GPUs), and a handler that throws fails the load
 * instead of loading as ready, which is what Kubernetes routes on.
 */
async function warmUp(handler: Handler, context: HandlerContext, config: CompleteModelConfig): Promise<void> {
  const sizes = config.max_batch_size > 0 ? [...new Set([1, ...config.dynamic_batching.preferred_batch_sizes])] : [0];
  for (const size of sizes) {
    const inputs = syntheticFeeds(config.inputs, size > 0 ? size : undefined);
    try {
      await runBatch(handler, [{ kind: 'tensors', inputs, rows: Math.max(size, 1), movable: false }], context);
    } catch (error) {
      const why = error instanceof Error ? error.message : String(error);
      throw new ModelLoadError(
        `warm-up failed at batch size ${Math.max(size, 1)}: ${why} (a handler that cannot take v2 tensors can set warmup: false)`,
        { cause: error },
      );
    }
  }
}
