import { createReadStream } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';

/** Copies `source` from byte `skip` on into `target` at `position`; returns the bytes copied. */
export async function appendFrom(target: FileHandle, position: number, source: string, skip = 0): Promise<number> {
  let copied = 0;
  for await (const chunk of createReadStream(source, { start: skip }) as AsyncIterable<Buffer>) {
    await target.write(chunk, 0, chunk.length, position + copied);
    copied += chunk.length;
  }
  return copied;
}

/**
 * Bytes of a CSV file's header line with its line end: up to the first LF outside quotes.
 * Every CSV segment and shard starts with the same header; joined files keep only the first.
 */
export async function csvHeaderLength(path: string): Promise<number> {
  let quoted = false;
  let offset = 0;
  for await (const chunk of createReadStream(path) as AsyncIterable<Buffer>) {
    for (let index = 0; index < chunk.length; index++) {
      const byte = chunk[index];
      if (byte === 0x22) quoted = !quoted;
      else if (byte === 0x0a && !quoted) return offset + index + 1;
    }
    offset += chunk.length;
  }
  return offset;
}
