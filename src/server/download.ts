import { createWriteStream } from 'node:fs';
import { rename, rm, stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import { defaultArchiveLimits } from '../archive/limits.js';
import { BatchserveError, ModelConflictError, ModelLoadError, UsageError } from '../core/errors.js';
import { assertStoreWritable } from '../repository/store-catalog.js';

export interface DownloadOptions {
  /** The largest download accepted, in bytes; default: the archive size limit. */
  readonly maxBytes?: number;
}

/**
 * Fetches an allow-listed archive URL into the model store. The file appears under its
 * final name only when complete; its size is capped like any archive's. A store that is
 * read-only or one archive is refused before the URL is fetched.
 */
export async function downloadArchive(url: string, store: string, options: DownloadOptions = {}): Promise<string> {
  const name = basename(new URL(url).pathname);
  if (!name.endsWith('.mar')) throw new UsageError(`the URL must name a .mar file, got ${url}`);
  await assertStoreWritable(store);
  const target = join(store, name);
  if (await stat(target).catch(() => undefined)) {
    throw new ModelConflictError(`${name} is already in the model store; register it by name`);
  }
  const limit = options.maxBytes ?? defaultArchiveLimits.maxTotalBytes;
  const partial = `${target}.partial-${process.pid}`;
  // undici takes about 15 MB loaded: only a server that downloads an archive loads it.
  const { request } = await import('undici');
  const response = await request(url, { headersTimeout: 30_000, bodyTimeout: 60_000 }).catch((error: Error) => {
    throw new ModelLoadError(`cannot fetch ${url}: ${error.message}`);
  });
  if (response.statusCode !== 200) {
    await response.body.dump();
    throw new ModelLoadError(`cannot fetch ${url}: HTTP ${response.statusCode}`);
  }
  if (Number(response.headers['content-length']) > limit) {
    // Refused before a byte is written; dump() drops a large body without reading it.
    await response.body.dump();
    throw new ModelLoadError(`${url} is larger than ${limit} bytes`);
  }
  let received = 0;
  const cap = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      received += chunk.length;
      callback(received > limit ? new ModelLoadError(`${url} is larger than ${limit} bytes`) : null, chunk);
    },
  });
  try {
    await pipeline(response.body, cap, createWriteStream(partial, { mode: 0o644 }));
    await rename(partial, target);
  } catch (error) {
    await rm(partial, { force: true });
    if (error instanceof BatchserveError) throw error;
    // A connection cut mid-body is the origin's failure, not a server bug: it gets a code too.
    throw new ModelLoadError(`cannot fetch ${url}: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  }
  return target;
}
