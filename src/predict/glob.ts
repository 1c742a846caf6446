import { UsageError } from '../core/errors.js';

/**
 * A glob over `/`-separated relative paths as a RegExp: `*` and `?` stay inside one folder
 * name, `**` spans any number of folders (none too), `{a,b}` is either and `[...]` a class.
 * (node:path's matchesGlob is still experimental in Node 20 and warns.)
 */
export function globToRegExp(glob: string): RegExp {
  let source = '';
  let braces = 0;
  for (let index = 0; index < glob.length; index++) {
    const char = glob[index] as string;
    if (char === '*' && glob[index + 1] === '*') {
      const slashAfter = glob[index + 2] === '/';
      source += slashAfter ? '(?:[^/]*/)*' : '.*';
      index += slashAfter ? 2 : 1;
    } else if (char === '*') {
      source += '[^/]*';
    } else if (char === '?') {
      source += '[^/]';
    } else if (char === '[') {
      const close = glob.indexOf(']', index + 2);
      if (close === -1) throw new UsageError(`--glob ${glob}: "[" without "]"`);
      const body = glob
        .slice(index + 1, close)
        .replace(/^!/, '^')
        .replace(/\\/g, '\\\\');
      source += `[${body}]`;
      index = close;
    } else if (char === '{') {
      braces++;
      source += '(?:';
    } else if (char === '}' && braces > 0) {
      braces--;
      source += ')';
    } else if (char === ',' && braces > 0) {
      source += '|';
    } else {
      source += char.replace(/[.+^$()|\\/]/g, '\\$&');
    }
  }
  if (braces > 0) throw new UsageError(`--glob ${glob}: "{" without "}"`);
  return new RegExp(`^${source}$`);
}

/** Without --glob: PNG and JPEG files at any depth, whatever the case of their extension. */
export const DEFAULT_IMAGE_PATTERN = /\.(?:png|jpe?g)$/i;
