import { basename, extname, resolve } from 'node:path';
import { unpackArchive } from '../archive/extract.js';
import { formatBytes } from './format.js';

export async function runUnpack(
  location: string,
  options: { output?: string; force: boolean; maxExpansion?: number },
): Promise<void> {
  const target = resolve(options.output ?? basename(location, extname(location)));
  const limits = options.maxExpansion === undefined ? {} : { maxExpansion: options.maxExpansion };
  const result = await unpackArchive(location, target, { force: options.force, limits });
  process.stdout.write(`unpacked ${result.files} files (${formatBytes(result.bytes)}) into ${result.targetDir}\n`);
}
