// Regenerates the reference pages that are rendered from code (run after `npm run build`).
import { writeFile } from 'node:fs/promises';
import { renderModelConfigReference } from '../dist/src/config/reference.js';

await writeFile(new URL('../docs/model-config.md', import.meta.url), renderModelConfigReference());
