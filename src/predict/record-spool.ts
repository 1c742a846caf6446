import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { nonBlankLines } from './jsonl-input.js';
import type { OutputTensor, RecordWriter, ScoredRecord } from './records.js';

/**
 * Records as JSON lines that read back exactly (64-bit integers as decimal strings, non-finite
 * floats and -0 as "NaN", "Infinity", "-Infinity", "-0"). A Parquet file cannot be appended to, so a Parquet
 * job commits its segments in this form and rewrites them as Parquet once, at the end.
 */
export function openRecordSpool(path: string): RecordWriter {
  const stream = createWriteStream(path);
  const failed = new Promise<never>((_, reject) => stream.once('error', reject));
  failed.catch(() => undefined);
  return {
    async write(record) {
      if (!stream.write(`${JSON.stringify(record, spoolValue)}\n`)) {
        await Promise.race([once(stream, 'drain'), failed]);
      }
    },
    async close() {
      stream.end();
      await Promise.race([once(stream, 'finish'), failed]);
    },
  };
}

function spoolValue(_key: string, value: unknown): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'number' && (!Number.isFinite(value) || Object.is(value, -0))) {
    return Object.is(value, -0) ? '-0' : String(value);
  }
  return value === undefined ? null : value;
}

/** The records of a spool file, in order. */
export async function* readRecordSpool(path: string): AsyncGenerator<ScoredRecord> {
  for await (const line of nonBlankLines(path)) {
    const stored = JSON.parse(line.bytes.toString('utf8')) as {
      id: string;
      model: string;
      version: string;
      outputs: Record<string, OutputTensor> | null;
      answer: string | null;
    };
    yield {
      id: stored.id,
      model: stored.model,
      version: stored.version,
      outputs: stored.outputs === null ? undefined : restoreOutputs(stored.outputs),
      answer: stored.answer ?? undefined,
    };
  }
}

function restoreOutputs(outputs: Record<string, OutputTensor>): Record<string, OutputTensor> {
  const restored: Record<string, OutputTensor> = {};
  for (const [name, tensor] of Object.entries(outputs)) {
    const { datatype } = tensor;
    const restore: ((value: OutputTensor['data'][number]) => number | bigint) | undefined =
      datatype === 'INT64' || datatype === 'UINT64'
        ? (value) => BigInt(value)
        : datatype === 'FP16' || datatype === 'FP32' || datatype === 'FP64'
          ? (value) => (typeof value === 'string' ? Number(value) : (value as number))
          : undefined;
    restored[name] = restore ? { ...tensor, data: tensor.data.map(restore) } : tensor;
  }
  return restored;
}
