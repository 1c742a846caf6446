// Regenerates the reference pages that are rendered from code (run after `npm run build`).
import { writeFile } from 'node:fs/promises';
import { renderModelConfigReference } from '../dist/src/config/reference.js';
import { renderServerConfigReference } from '../dist/src/server/server-config.js';

await writeFile(new URL('../docs/model-config.md', import.meta.url), renderModelConfigReference());
await writeFile(new URL('../docs/server-config.md', import.meta.url), renderServerConfigReference());
