import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import { extname, join } from 'node:path';
import { DatasetError, InferenceInputError, InputFileError } from '../core/errors.js';
import type { Dataset, DatasetRow, LocatedInput } from './dataset.js';
import { DEFAULT_IMAGE_PATTERN, globToRegExp } from './glob.js';

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
};

/**
 * A folder of images, walked recursively and sorted by relative path (code-unit order, the
 * same on every machine). Each file is one row whose id is that path; its bytes go to the
 * handler as the body of a TorchServe-style request, as `POST /predictions` sends them.
 */
export async function locateImageFolder(root: string, glob: string | undefined): Promise<LocatedInput> {
  const matches = glob === undefined ? DEFAULT_IMAGE_PATTERN : globToRegExp(glob);
  const files = (await walk(root, '')).filter((file) => matches.test(file.name));
  files.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const digest = createHash('sha256');
  for (const file of files) digest.update(`${file.name}\0${file.size}\0${file.mtimeMs}\n`);
  return {
    identity: {
      path: root,
      kind: 'images',
      files: files.length,
      size: files.reduce((total, file) => total + file.size, 0),
      mtimeMs: files.reduce((newest, file) => Math.max(newest, file.mtimeMs), 0),
      digest: digest.digest('hex').slice(0, 16),
    },
    async open() {
      if (files.length === 0) {
        throw new DatasetError(
          `${root} holds no files matching ${glob === undefined ? '*.png, *.jpg, *.jpeg' : `--glob ${glob}`}`,
        );
      }
      return imageDataset(
        root,
        files.map((file) => file.name),
      );
    },
  };
}

function imageDataset(root: string, names: readonly string[]): Dataset {
  return {
    rowCount: names.length,
    async *rows(from, to): AsyncGenerator<DatasetRow> {
      for (let row = from; row < Math.min(to, names.length); row++) {
        const id = names[row] as string;
        const body = await readFile(join(root, id)).catch((error: NodeJS.ErrnoException) => error);
        if (body instanceof Error) {
          const failure = new InputFileError(`cannot read ${id}: ${body.code ?? body.message}`);
          yield { row, id, failure: { reason: failure.message, code: failure.code } };
        } else if (body.length === 0) {
          const failure = new InferenceInputError(`${id} is empty`);
          yield { row, id, failure: { reason: failure.message, code: failure.code } };
        } else {
          const contentType = CONTENT_TYPES[extname(id).toLowerCase()] ?? 'application/octet-stream';
          yield {
            row,
            id,
            request: { kind: 'body', body, contentType, movable: true },
            rows: 1,
            shapeKey: `body:${contentType}`,
          };
        }
      }
    },
  };
}

interface FoundFile {
  /** Relative to the root, `/`-separated. */
  readonly name: string;
  readonly size: number;
  readonly mtimeMs: number;
}

async function walk(root: string, prefix: string): Promise<FoundFile[]> {
  const entries = await readdir(join(root, prefix), { withFileTypes: true });
  const found: FoundFile[] = [];
  for (const entry of entries) {
    const name = prefix === '' ? entry.name : `${prefix}/${entry.name}`;
    if (entry.isDirectory()) {
      found.push(...(await walk(root, name)));
    } else if (entry.isFile() || entry.isSymbolicLink()) {
      // A dangling link stays a row: reading it fails, and the errors file says so.
      const info = await stat(join(root, name)).catch(() => undefined);
      if (!info) found.push({ name, size: 0, mtimeMs: 0 });
      else if (info.isFile()) found.push({ name, size: info.size, mtimeMs: info.mtimeMs });
    }
  }
  return found;
}
