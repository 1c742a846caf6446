import { basename, extname, resolve } from 'node:path';
import { unpackArchive } from '../archive/extract.js';
import { formatBytes } from './format.js';

export async function runUnpack(location: string, options: { output?: string; force: boolean }): Promise<void> {
  const target = resolve(options.output ?? basename(location, extname(location)));
  const result = await unpackArchive(location, target, { force: options.force });
  process.stdout.write(`unpacked ${result.files} files (${formatBytes(result.bytes)}) into ${result.targetDir}\n`);
}
