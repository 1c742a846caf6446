import { readFileSync } from 'node:fs';

/** batchserve's own version, from the package.json two levels above dist/src. */
export const BATCHSERVE_VERSION: string = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;
