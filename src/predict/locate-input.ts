import { stat } from 'node:fs/promises';
import { extname, resolve } from 'node:path';
import { InputFileError, UsageError } from '../core/errors.js';
import { locateCsv } from './csv-input.js';
import type { InputKind, InputSpec, LocatedInput } from './dataset.js';
import { locateImageFolder } from './image-folder-input.js';
import { locateJsonl } from './jsonl-input.js';
import { locateNpy } from './npy-input.js';

/** Finds the input and identifies it; refuses options that do not fit its kind. */
export async function locateInput(spec: InputSpec): Promise<LocatedInput> {
  const path = resolve(spec.path);
  const found = await stat(path).catch((error: NodeJS.ErrnoException) => {
    throw new InputFileError(`cannot read --input ${spec.path}: ${error.code ?? error.message}`);
  });
  const kind = spec.kind ?? inferKind(path, found.isDirectory());
  if ((kind === 'images') !== found.isDirectory()) {
    throw new UsageError(
      kind === 'images'
        ? `--input ${spec.path} is a file; image input is a folder`
        : `--input ${spec.path} is a folder; a folder is read as images (--input-format images)`,
    );
  }
  if (spec.glob !== undefined && kind !== 'images') throw new UsageError('--glob applies to a folder of images only');
  if ((spec.csvColumns !== undefined || spec.idColumn !== undefined) && kind !== 'csv') {
    throw new UsageError('--csv-columns and --id-column apply to CSV input only');
  }
  const file = { path, kind, size: found.size, mtimeMs: found.mtimeMs };
  switch (kind) {
    case 'images':
      return locateImageFolder(path, spec.glob);
    case 'npy':
      return locateNpy(file);
    case 'csv':
      return locateCsv(file, spec);
    case 'jsonl':
      return locateJsonl(file);
  }
}

/** The kind an input is read as when --input-format does not say. */
export function inferKind(path: string, isDirectory: boolean): InputKind {
  if (isDirectory) return 'images';
  const extension = extname(path).toLowerCase();
  return extension === '.npy' ? 'npy' : extension === '.csv' ? 'csv' : 'jsonl';
}
