import { realpathSync } from 'node:fs';
import { isAbsolute, join, relative, sep } from 'node:path';
import { ArchiveUnsafePathError } from './errors.js';
import { quoted } from './quote.js';

// The one rule for names inside an archive, for the zip listing, the manifest, configs and
// loaders alike.

// C0 controls, DEL and C1 controls: names that rewrite a terminal or break a log line.
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f]/;
/** Device names Windows opens instead of a file, with or without an extension. */
const WINDOWS_DEVICE = /^(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³]|conin\$|conout\$)(\.|$)/i;
/** Characters no Windows file name may hold (':' is refused on its own, with its reason). */
const WINDOWS_RESERVED = /[<>"|?*]/;
/** Bytes of one path segment most file systems hold (ext4, APFS, NTFS: 255). */
export const MAX_SEGMENT_BYTES = 255;
/** Characters of a whole name: far beyond any real archive, well inside PATH_MAX. */
export const MAX_NAME_LENGTH = 1024;

/**
 * Why a name inside an archive is unsafe, or undefined when it is a plain relative path that
 * means the same file on every system. Manifests and configs name files by the same rule.
 */
export function entryNameProblem(name: string): string | undefined {
  if (name === '') return 'is empty';
  if (name.includes('\0')) return 'contains a NUL byte';
  if (CONTROL_CHARACTER.test(name)) return 'contains a control character';
  if (name.includes('\\')) return 'contains a backslash, a separator on Windows';
  if (name.startsWith('/')) return 'is an absolute path';
  if (name.includes(':')) return 'contains ":", a drive letter or a stream name on Windows';
  const reserved = WINDOWS_RESERVED.exec(name)?.[0];
  if (reserved !== undefined) return `contains "${reserved}", which Windows file names may not hold`;
  if (name.length > MAX_NAME_LENGTH) return `is ${name.length} characters long, over ${MAX_NAME_LENGTH}`;
  for (const segment of name.split('/')) {
    if (segment === '') return 'has an empty path segment';
    if (segment === '.' || segment === '..') return `has a "${segment}" path segment`;
    if (Buffer.byteLength(segment) > MAX_SEGMENT_BYTES) return `has a segment over ${MAX_SEGMENT_BYTES} bytes`;
    if (WINDOWS_DEVICE.test(segment)) return `has the segment "${segment}", a device name on Windows`;
    if (/[. ]$/.test(segment)) return `has a segment ending in "${segment.at(-1)}", which Windows drops`;
  }
  return undefined;
}

/**
 * Where archive file `name` is under `root` on disk, checked on the real paths: a safe name
 * whose resolved file (links followed) stays inside the real `root`. What every loader joins
 * a manifest's or a config's path with, so none can open a file outside the archive.
 * `what` names the file in the error ("the handler", "labels_file").
 */
export function pathInside(root: string, name: string, what: string): string {
  const refuse = (why: string): never => {
    throw new ArchiveUnsafePathError(`${what} ${quoted(name)} ${why}`);
  };
  const problem = entryNameProblem(name);
  if (problem !== undefined) refuse(problem);
  const realRoot = realpathSync(root);
  const path = join(realRoot, ...name.split('/'));
  let real: string;
  try {
    real = realpathSync(path);
  } catch {
    // A file that is not there cannot be outside; its opener reports it missing.
    return path;
  }
  const fromRoot = relative(realRoot, real);
  if (fromRoot === '' || fromRoot === '..' || fromRoot.startsWith(`..${sep}`) || isAbsolute(fromRoot)) {
    refuse(`resolves outside the archive's folder ${realRoot}`);
  }
  return real;
}
