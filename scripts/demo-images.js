// Writes a folder of rendered text lines for `batchserve predict` on the demo model:
// line-000.png, line-001.png, …, upright and upside down in turn.
// Usage: node scripts/demo-images.js DIR COUNT
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { textLine } from './text-line.js';

const [dir, count] = process.argv.slice(2);
if (!dir || !(Number(count) > 0)) throw new Error('usage: node scripts/demo-images.js DIR COUNT');
await mkdir(dir, { recursive: true });
for (let index = 0; index < Number(count); index++) {
  await writeFile(join(dir, `line-${String(index).padStart(3, '0')}.png`), textLine(index % 2 === 1));
}
