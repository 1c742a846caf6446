import { createReadStream } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { PredictionLogReadError } from '../core/errors.js';
import { listLogFiles } from './log-files.js';
import type { LogRecord } from './log-records.js';

/**
 * The files `--log` names: one `.jsonl` file; a model's log folder; or the folder the server
 * was given with `--prediction-log DIR`, which holds one log folder per model. Oldest first
 * within each folder, so ties in time keep the order they were written in.
 */
export async function findLogFiles(logPath: string): Promise<string[]> {
  let files: string[];
  try {
    files = (await stat(logPath)).isFile() ? [logPath] : await filesInFolder(logPath);
  } catch (error) {
    throw new PredictionLogReadError(`${logPath}: ${(error as Error).message}`, { cause: error });
  }
  if (files.length === 0) throw new PredictionLogReadError(`${logPath}: no predictions-*.jsonl files in it`);
  return files;
}

async function filesInFolder(folder: string): Promise<string[]> {
  const files = (await listLogFiles(folder)).map((file) => file.path);
  const entries = await readdir(folder, { withFileTypes: true });
  const subfolders = entries.filter((entry) => entry.isDirectory()).map((entry) => path.join(folder, entry.name));
  for (const subfolder of subfolders.sort()) {
    files.push(...(await listLogFiles(subfolder)).map((file) => file.path));
  }
  return files;
}

/**
 * Streams each file line by line, so a large log is never held as one string, and hands every
 * record to `visit`. Returns how many lines were not records: a crash can leave the last line
 * of a file cut short, and that must not stop a report.
 */
export async function readLogRecords(files: readonly string[], visit: (record: LogRecord) => void): Promise<number> {
  let skipped = 0;
  for (const file of files) {
    const lines = createInterface({ input: createReadStream(file, 'utf8'), crlfDelay: Infinity });
    try {
      for await (const line of lines) {
        if (line.trim() === '') continue;
        const record = parseLogLine(line);
        if (record) visit(record);
        else skipped += 1;
      }
    } catch (error) {
      throw new PredictionLogReadError(`${file}: ${(error as Error).message}`, { cause: error });
    }
  }
  return skipped;
}

/** A record, or undefined when the line is not JSON or not an object of a known type with its key fields. */
export function parseLogLine(line: string): LogRecord | undefined {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const record = value as Record<string, unknown>;
  const common =
    typeof record.id === 'string' &&
    typeof record.model === 'string' &&
    typeof record.time === 'string' &&
    Number.isFinite(Date.parse(record.time));
  if (!common) return undefined;
  if (record.type === 'feedback') return value as LogRecord;
  if (
    record.type === 'prediction' &&
    typeof record.version === 'string' &&
    typeof record.status === 'number' &&
    typeof record.latency_ms === 'number'
  ) {
    return value as LogRecord;
  }
  return undefined;
}
