import { UsageError } from '../core/errors.js';
import { MODEL_CONFIG_LIMITS } from '../config/model-config.js';
import type { BatchingChange, LoadedModel } from '../repository/loaded-model.js';
import type { ModelRepository } from '../repository/model-repository.js';

/**
 * What a management call (TorchServe's register and scale, or a v2 load's config) changes on a
 * loaded version. Read and checked whole before anything is applied, so a refused call changes
 * nothing.
 */
export interface ModelChange extends BatchingChange {
  /** The instance count to run (TorchServe's min_worker / initial_workers). */
  readonly instances?: number;
  /**
   * TorchServe's max_worker. Instances here are a fixed count, not a pool that grows under
   * load: the count is min_worker, max_worker must be at least it, and max_worker alone
   * lowers a larger running count to it.
   */
  readonly maxInstances?: number;
}

/** The change a TorchServe register or scale query asks for; every parameter checked, all problems at once. */
export function modelChangeOf(query: URLSearchParams): ModelChange {
  const problems: string[] = [];
  const read = <T>(name: string, parse: (value: string) => T): T | undefined => {
    const value = query.get(name);
    if (value === null) return undefined;
    try {
      return parse(value);
    } catch (error) {
      problems.push((error as Error).message);
      return undefined;
    }
  };
  const maxBatchSize = read('batch_size', (value) => nonNegativeInt(value, 'batch_size'));
  const delay = read('max_batch_delay', (value) =>
    value === 'auto' ? ('auto' as const) : Math.round(nonNegativeNumber(value, 'max_batch_delay') * 1000),
  );
  const minWorker = read('min_worker', (value) => instanceCount(value, 'min_worker'));
  const initialWorkers = read('initial_workers', (value) => instanceCount(value, 'initial_workers'));
  const maxWorker = read('max_worker', (value) => instanceCount(value, 'max_worker'));
  const instances = minWorker ?? initialWorkers;
  if (instances !== undefined && maxWorker !== undefined && instances > maxWorker) {
    problems.push(`min_worker (${instances}) is more than max_worker (${maxWorker})`);
  }
  if (problems.length > 0) throw new UsageError(problems.join('; '));
  return {
    ...(maxBatchSize !== undefined ? { maxBatchSize } : {}),
    ...(delay !== undefined ? { maxQueueDelayUs: delay } : {}),
    ...(instances !== undefined ? { instances } : {}),
    ...(maxWorker !== undefined ? { maxInstances: maxWorker } : {}),
  };
}

/** Throws what applying `change` to `model` would refuse, changing nothing. */
export function checkModelChange(model: LoadedModel, change: ModelChange): void {
  model.checkReconfigure(change);
}

/** Applies a checked change: batching first (it cannot fail now), then the instance count. */
export async function applyModelChange(model: LoadedModel, change: ModelChange): Promise<void> {
  checkModelChange(model, change);
  if (change.maxBatchSize !== undefined || change.maxQueueDelayUs !== undefined) {
    model.reconfigure({
      ...(change.maxBatchSize !== undefined ? { maxBatchSize: change.maxBatchSize } : {}),
      ...(change.maxQueueDelayUs !== undefined ? { maxQueueDelayUs: change.maxQueueDelayUs } : {}),
    });
  }
  const count = Math.min(change.instances ?? model.instances.length, change.maxInstances ?? Infinity);
  if (count !== model.instances.length) await model.scale(count);
}

export function nonNegativeNumber(value: string, name: string): number {
  const number = Number(value);
  if (value.trim() === '' || !Number.isFinite(number) || number < 0) {
    throw new UsageError(`${name} must be a non-negative number, got "${value}"`);
  }
  return number;
}

export function nonNegativeInt(value: string, name: string): number {
  const number = nonNegativeNumber(value, name);
  if (!Number.isSafeInteger(number)) throw new UsageError(`${name} must be an integer, got "${value}"`);
  return number;
}

function instanceCount(value: string, name: string): number {
  const count = nonNegativeInt(value, name);
  if (count < 1 || count > MODEL_CONFIG_LIMITS.instances) {
    throw new UsageError(`${name} must be from 1 to ${MODEL_CONFIG_LIMITS.instances}, got "${value}"`);
  }
  return count;
}

/**
 * A v2 repository load: the store's versions the policy keeps and that are not loaded yet,
 * then `change` on every loaded version of the model (a load with a config reloads with it,
 * in Triton). A change a version refuses leaves the loaded ones as they were and unloads the
 * ones this load added.
 */
export async function loadFromStoreWith(repository: ModelRepository, name: string, change: ModelChange): Promise<void> {
  for (const model of repository.versions(name)) checkModelChange(model, change);
  const added = await repository.loadFromStore(name);
  try {
    for (const model of added) checkModelChange(model, change);
  } catch (error) {
    for (const model of added) await repository.unload(name, model.version, { force: true });
    throw error;
  }
  for (const model of repository.versions(name)) await applyModelChange(model, change);
}

/** A v2 load's parameters: `config`, a string of JSON, is the one taken; any other is refused. */
export function modelChangeOfLoadParameters(parameters: ReadonlyMap<string, unknown>, name: string): ModelChange {
  const others = [...parameters.keys()].filter((key) => key !== 'config');
  if (others.length > 0) {
    throw new UsageError(
      `load parameters ${others.map((key) => JSON.stringify(key)).join(', ')} are not supported; only "config" is`,
    );
  }
  const config = parameters.get('config');
  if (config === undefined) return {};
  if (typeof config !== 'string') {
    throw new UsageError("the load parameter config must be a string of JSON (Triton's model config)");
  }
  return modelChangeOfTritonConfig(config, name);
}

const CONFIG_KEYS = 'max_batch_size, dynamic_batching.max_queue_delay_microseconds, instance_group[].count and name';

/**
 * A v2 repository load's `config` (Triton's model config as JSON). Triton loads the model with
 * that config in place of its own; here the keys that can change on a loaded version replace
 * the archive's values (max_batch_size, the queue delay, the instance count: the sum of the
 * groups' counts) and the rest of its config stays. Any other key is refused, not ignored, so a
 * load never answers success for a setting it did not apply.
 */
export function modelChangeOfTritonConfig(text: string, modelName: string): ModelChange {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new UsageError(`the load's config is not JSON: ${(error as Error).message}`);
  }
  if (!isObject(parsed)) throw new UsageError("the load's config must be a JSON object (Triton's model config)");
  const problems: string[] = [];
  const change: { maxBatchSize?: number; maxQueueDelayUs?: number; instances?: number } = {};
  const count = (value: unknown, key: string, least: number): number | undefined => {
    if (typeof value === 'number' && Number.isSafeInteger(value) && value >= least) return value;
    problems.push(`${key} must be an integer of at least ${least}, got ${JSON.stringify(value)}`);
    return undefined;
  };
  for (const [key, value] of Object.entries(parsed)) {
    if (key === 'name') {
      if (value !== modelName) problems.push(`name ${JSON.stringify(value)} is not the model loaded, "${modelName}"`);
    } else if (key === 'max_batch_size') {
      const size = count(value, key, 0);
      if (size !== undefined) change.maxBatchSize = size;
    } else if (key === 'dynamic_batching' && isObject(value)) {
      for (const [field, delay] of Object.entries(value)) {
        if (field !== 'max_queue_delay_microseconds') {
          problems.push(`dynamic_batching.${field} cannot be set by a load here`);
          continue;
        }
        const us = count(delay, `dynamic_batching.${field}`, 0);
        if (us !== undefined) change.maxQueueDelayUs = us;
      }
    } else if (key === 'instance_group' && Array.isArray(value) && value.length > 0) {
      let total = 0;
      value.forEach((group: unknown, index) => {
        const where = `instance_group[${index}]`;
        if (!isObject(group)) return void problems.push(`${where} must be an object`);
        for (const field of Object.keys(group)) {
          if (field !== 'count') problems.push(`${where}.${field} cannot be set by a load here`);
        }
        total += count(group.count, `${where}.count`, 1) ?? 0;
      });
      if (total > MODEL_CONFIG_LIMITS.instances)
        problems.push(`instance_group counts add up to ${total}, over ${MODEL_CONFIG_LIMITS.instances}`);
      else change.instances = total;
    } else {
      problems.push(`${key} cannot be set by a load here`);
    }
  }
  if (problems.length > 0) throw new UsageError(`${problems.join('; ')} (a load's config may set ${CONFIG_KEYS})`);
  return change;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
