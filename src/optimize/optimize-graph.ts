import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ort from 'onnxruntime-node';
import type { GraphOptimization } from '../archive/manifest.js';
import type { ModelConfig } from '../config/model-config.js';
import { ModelLoadError } from '../core/errors.js';
import { onnxruntimeVersion, SAVED_OPTIMIZATION_LEVEL } from '../runtime/optimized-graph.js';
import { createSession } from '../runtime/session.js';

export interface OptimizedGraph {
  readonly bytes: Buffer;
  readonly optimization: GraphOptimization;
}

/**
 * onnxruntime's own offline optimisation: a CPU session at the `extended` level with
 * `optimizedModelFilePath` writes the graph it would run, so a server that loads that file
 * skips the rewriting it would otherwise do at every start.
 */
export async function optimizeGraph(model: Uint8Array, source: string): Promise<OptimizedGraph> {
  const directory = await mkdtemp(join(tmpdir(), 'batchserve-optimize-'));
  try {
    const output = join(directory, 'optimized.onnx');
    try {
      const session = await ort.InferenceSession.create(model, {
        executionProviders: ['cpu'],
        graphOptimizationLevel: SAVED_OPTIMIZATION_LEVEL,
        optimizedModelFilePath: output,
        logSeverityLevel: 4,
      });
      await session.release();
    } catch (error) {
      throw new ModelLoadError(`onnxruntime cannot optimise ${source}: ${(error as Error).message.split('\n')[0]}`, {
        cause: error,
      });
    }
    return {
      bytes: await readFile(output),
      optimization: { level: SAVED_OPTIMIZATION_LEVEL, onnxruntimeVersion: onnxruntimeVersion() },
    };
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
}

/** Session creation time: the median of a few, as the server would open the model. */
export async function measureStartupMs(
  model: Uint8Array,
  runtime: Omit<ModelConfig['runtime'], 'thread'>,
  tries = 5,
): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < tries; i++) {
    const started = process.hrtime.bigint();
    const session = await createSession(model, { runtime });
    times.push(Number(process.hrtime.bigint() - started) / 1e6);
    await session.release();
  }
  return times.sort((a, b) => a - b)[Math.floor(times.length / 2)] as number;
}
