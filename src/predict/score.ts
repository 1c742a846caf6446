import { isTensors, splitRows, type Tensors } from '../core/tensors.js';
import { isBuiltinHandler } from '../handlers/load.js';
import type { LoadedModel } from '../repository/loaded-model.js';
import { rowFailure, type ReadyRow } from './dataset.js';
import type { RowOutcome } from './row-stream.js';
import { scoredRecord, type Scorer } from './scored-record.js';

/**
 * Runs one request through the model's batcher and handler, exactly as a served request runs.
 * A chunk of rows answers with tensors of that many rows, split back to one record a row; a
 * chunk that fails (or answers otherwise) runs again one row a request, as the batcher retries
 * a failed batch, so only a bad row fails.
 */
export async function score(model: Pick<LoadedModel, 'infer'>, scorer: Scorer, item: ReadyRow): Promise<RowOutcome[]> {
  const { chunk } = item;
  try {
    const { response } = await model.infer(item.request, { rows: item.rows, shapeKey: item.shapeKey });
    if (!chunk) return [{ row: item.row, record: scoredRecord(item.id, scorer, response, item.outputs) }];
    const parts = splitByRow(response, chunk.count);
    if (parts) {
      return parts.map((part, index) => ({
        row: item.row + index,
        record: scoredRecord(chunk.ids[index] as string, scorer, part, item.outputs),
      }));
    }
  } catch (error) {
    if (!chunk) return [{ row: item.row, id: item.id, failure: rowFailure(error) }];
  }
  const rows = await chunk.split();
  return (await Promise.all(rows.map((row) => score(model, scorer, row)))).flat();
}

/** A response of tensors whose first dimension is `count`, as one response a row; else undefined. */
function splitByRow(response: unknown, count: number): Tensors[] | undefined {
  if (!isTensors(response)) return undefined;
  const tensors = Object.entries(response);
  if (!tensors.every(([, tensor]) => tensor.dims[0] === count)) return undefined;
  const rows: Tensors[] = Array.from({ length: count }, () => ({}));
  const ones = new Array<number>(count).fill(1);
  for (const [name, tensor] of tensors) {
    splitRows(tensor, ones).forEach((part, index) => ((rows[index] as Tensors)[name] = part));
  }
  return rows;
}

/**
 * Rows per request for inputs that can send several (`.npy`): a full batch, when the model
 * batches and its handler is a built-in one, which answers tensors of as many rows as it was
 * given; one otherwise, since a custom handler may answer a request as a whole.
 */
export function chunkRowsFor(model: Pick<LoadedModel, 'config' | 'manifest'>): number {
  const batching = model.config.max_batch_size > 0 && isBuiltinHandler(model.manifest.model.handler);
  return batching ? model.config.max_batch_size : 1;
}
