import { UsageError } from '../core/errors.js';
import { MAX_INSTANCES, type BatchingChange, type LoadedModel } from '../repository/loaded-model.js';

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
  if (count < 1 || count > MAX_INSTANCES) {
    throw new UsageError(`${name} must be from 1 to ${MAX_INSTANCES}, got "${value}"`);
  }
  return count;
}
