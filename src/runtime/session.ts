import { availableParallelism, cpus } from 'node:os';
import ort from 'onnxruntime-node';
import { ModelLoadError } from '../core/errors.js';
import type { ModelConfig } from '../config/model-config.js';
import { datatypeOfOrtType } from '../core/datatypes.js';
import { AUTO_ORDER, fixFor, providersFor } from './devices.js';
import type { TensorSpec } from '../core/tensors.js';

// Load failures reach callers as exceptions; onnxruntime's own log would repeat them on stderr.
ort.env.logLevel = 'fatal';

/** The ONNX graph's own inputs and outputs, as onnxruntime reads them (the served version's are `ModelSignature`). */
export interface GraphSignature {
  readonly inputs: readonly TensorSpec[];
  readonly outputs: readonly TensorSpec[];
}

export type SessionOptions = { runtime: Omit<ModelConfig['runtime'], 'thread'> } & {
  /** A config device (cpu, webgpu, cuda[:N], tensorrt[:N]); default cpu. */
  readonly device?: string;
};

/** Opens an onnxruntime session on a model file or its bytes, on the given device. */
export async function createSession(
  model: string | Uint8Array,
  { runtime, device = 'cpu' }: SessionOptions,
  source = typeof model === 'string' ? model : 'model',
): Promise<ort.InferenceSession> {
  const options: ort.InferenceSession.SessionOptions = {
    executionProviders: providersFor(device).providers,
    graphOptimizationLevel: runtime.graph_optimization_level,
    // Errors reach the caller as exceptions; onnxruntime's own log would repeat them on stderr.
    logSeverityLevel: 4,
  };
  const intraOpThreads = runtime.intra_op_threads > 0 ? runtime.intra_op_threads : allowedCpusIfRestricted();
  if (intraOpThreads !== undefined) options.intraOpNumThreads = intraOpThreads;
  if (runtime.inter_op_threads > 0) options.interOpNumThreads = runtime.inter_op_threads;
  try {
    return typeof model === 'string'
      ? await ort.InferenceSession.create(model, options)
      : await ort.InferenceSession.create(model, options);
  } catch (error) {
    const fix = device === 'cpu' ? undefined : fixFor(device);
    throw new ModelLoadError(
      `onnxruntime cannot load ${source} on ${device}: ${firstLine(error)}${fix ? ` — ${fix}` : ''}`,
      { cause: error },
    );
  }
}

/** The model's real inputs and outputs; symbolic dimensions become -1. */
export function readSignature(session: ort.InferenceSession, source: string): GraphSignature {
  const describe = (metadata: readonly ort.InferenceSession.ValueMetadata[]): TensorSpec[] =>
    metadata.map((value) => {
      if (!value.isTensor)
        throw new ModelLoadError(`${source}: "${value.name}" is not a tensor; batchserve serves tensors only`);
      const datatype = datatypeOfOrtType(value.type);
      if (!datatype)
        throw new ModelLoadError(`${source}: "${value.name}" has type ${value.type}, which KServe v2 cannot carry`);
      return {
        name: value.name,
        datatype,
        shape: value.shape.map((dim) => (typeof dim === 'number' && dim > 0 ? dim : -1)),
      };
    });
  return { inputs: describe(session.inputMetadata), outputs: describe(session.outputMetadata) };
}

export interface DeviceSession {
  readonly session: ort.InferenceSession;
  /** The device the session runs on: `auto` resolved to what initialized. */
  readonly device: string;
  /** For `auto`: one line saying what was picked and why the others were skipped. */
  readonly note?: string;
}

/**
 * A session on `device`; `auto` tries the accelerators in order and keeps the first that
 * actually initializes (tried, not guessed from the platform), CPU last.
 */
export async function createDeviceSession(
  model: string | Uint8Array,
  options: SessionOptions,
  source?: string,
): Promise<DeviceSession> {
  if (options.device !== 'auto') {
    return { session: await createSession(model, options, source), device: options.device ?? 'cpu' };
  }
  const skipped: string[] = [];
  for (const device of AUTO_ORDER) {
    try {
      const session = await createSession(model, { ...options, device }, source);
      const why = skipped.length > 0 ? `; skipped ${skipped.join('; ')}` : '';
      return { session, device, note: `device auto picked ${device}${why}` };
    } catch (error) {
      if (device === 'cpu') throw error;
      skipped.push(`${device}: ${(error as Error).message.replace(/^.*? on [^:]+: /, '').split(' — ')[0] ?? ''}`);
    }
  }
  throw new ModelLoadError('no device initialized');
}

export async function readGraphSignature(model: string | Uint8Array, source?: string): Promise<GraphSignature> {
  const session = await createSession(
    model,
    { runtime: { intra_op_threads: 1, inter_op_threads: 1, graph_optimization_level: 'disabled' } },
    source,
  );
  try {
    return readSignature(session, source ?? 'model');
  } finally {
    await session.release();
  }
}

/** onnxruntime's message without its source-location preamble, first line only. */
function firstLine(error: unknown): string {
  const message = (error instanceof Error ? error.message : String(error)).split('\n')[0] ?? '';
  return message.replace(/^\/onnxruntime_src\/\S+:\d+ .*? was false\. /, '');
}

/**
 * The CPUs this process may run on, when that is fewer than the machine has (taskset, a
 * container's cpuset); else undefined. Left to choose, onnxruntime sizes its intra-op pool by
 * the machine's cores and pins each thread to one of them, outside a restricted process's CPUs:
 * a server started with `taskset -c 0` had a thread on CPU 1. Given a count, it pins none.
 */
function allowedCpusIfRestricted(): number | undefined {
  const allowed = availableParallelism();
  return allowed < cpus().length ? allowed : undefined;
}
