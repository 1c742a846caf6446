import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { listLogFiles } from './log-files.js';
import type { PredictionRecord } from './log-records.js';

/** What feedback needs of the prediction it joins: who answered, and what. */
export interface PredictionRef {
  readonly version: string;
  readonly prediction: PredictionRecord['prediction'];
}

/**
 * Recent predictions of one model by request id, so feedback joins without reading the disk.
 * Bounded: past `capacity` the oldest ids are forgotten (a later id reuse replaces the older
 * entry), and feedback for them is looked up in the log files instead.
 */
export class PredictionIndex<Entry extends PredictionRef = PredictionRef> {
  readonly #entries = new Map<string, Entry>();
  readonly #capacity: number;

  constructor(capacity = 100_000) {
    this.#capacity = capacity;
  }

  add(id: string, ref: Entry): void {
    this.#entries.delete(id);
    this.#entries.set(id, ref);
    if (this.#entries.size > this.#capacity) this.#entries.delete(this.#entries.keys().next().value as string);
  }

  get(id: string): Entry | undefined {
    return this.#entries.get(id);
  }
}

/**
 * The newest served prediction of `model` with request id `id` in a log folder, read from the
 * newest file back; undefined when no file holds one. For feedback on predictions older than
 * the index remembers, or made before a restart.
 */
export async function findLoggedPrediction(
  folder: string,
  model: string,
  id: string,
): Promise<PredictionRef | undefined> {
  // Each record is one JSON.stringify line, so its id appears exactly like this.
  const needle = `"id":${JSON.stringify(id)}`;
  for (const file of (await listLogFiles(folder)).reverse()) {
    let found: PredictionRef | undefined;
    const lines = createInterface({ input: createReadStream(file.path), crlfDelay: Infinity });
    for await (const line of lines) {
      if (!line.includes(needle)) continue;
      const record = parseRecord(line);
      if (record?.type === 'prediction' && record.id === id && record.model === model && record.shadow !== true) {
        found = { version: record.version, prediction: record.prediction };
      }
    }
    if (found) return found;
  }
  return undefined;
}

function parseRecord(line: string): PredictionRecord | undefined {
  try {
    return JSON.parse(line) as PredictionRecord;
  } catch {
    return undefined;
  }
}
