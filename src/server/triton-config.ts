import { tritonConfigOf } from '../config/triton-config-view.js';
import { tritonConfigJson } from '../config/triton-model-config.js';
import type { LoadedModel } from '../repository/loaded-model.js';

/**
 * Triton's model configuration extension (GET …/config, gRPC ModelConfig): the config as
 * Triton returns it for that model, every default printed, so Triton clients and
 * perf_analyzer read what they would read from Triton. A model of a Triton repository keeps
 * what its config.pbtxt says beyond batchserve's keys; its live batching and instance count
 * are today's. `batchserve` carries our full config.
 */
export function tritonModelConfig(model: LoadedModel): Record<string, unknown> {
  const { config, triton } = model;
  // A pipeline's instances run its steps on the server's own thread.
  const devices = model.devices().filter((device) => device !== 'pipeline');
  const instances = devices.map((device) => ({
    device,
    count: model.instances.filter((instance) => instance.device === device).length,
  }));
  const view = tritonConfigOf(config, {
    name: model.name,
    ...(triton
      ? { base: triton.config, versionPolicy: triton.versionPolicy, modelFilename: triton.modelFilename }
      : { versionPolicy: { all: true } }),
    ...(instances.length > 0 ? { instances } : {}),
  });
  return { ...tritonConfigJson(view), batchserve: config };
}
