// The OCR pipeline from a fresh clone after `npm ci` (npm run demo:ocr): pack the three
// PaddleOCR models and the pipeline, serve them with `batchserve serve` on free ports, render
// an image with known text (one line upside down), send it to /predictions/ocr, print the
// lines read, stop the server.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { packOcrPipeline } from '../dist/examples/ocr/pipeline/pack.js';
import { serveOcr } from '../dist/examples/ocr/pipeline/serve-child.js';
import { renderTextPng } from '../dist/test/examples/ocr/render-text.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = join(root, 'demo-out', 'ocr');
await mkdir(out, { recursive: true });

console.log('== pack');
const archives = await packOcrPipeline(out);
for (const archive of Object.values(archives)) console.log(`  ${archive}`);

console.log('\n== serve');
const server = await serveOcr(root, archives, { workDir: out });
console.log(`  inference ${server.urls.inference}`);
try {
  const drawn = [
    { text: 'Batchserve', x: 24, baseline: 48, size: 32 },
    { text: 'PIPELINE2026', x: 24, baseline: 108, size: 32 },
    { text: 'upsidedown', x: 40, baseline: 168, size: 32, upsideDown: true },
  ];
  const image = renderTextPng(360, 200, drawn);
  const imageFile = join(out, 'sample.png');
  await writeFile(imageFile, image);
  console.log(`\n== POST /predictions/ocr  (${imageFile}: ${drawn.map((line) => line.text).join(', ')})`);
  const response = await fetch(`${server.urls.inference}/predictions/ocr`, {
    method: 'POST',
    headers: { 'content-type': 'image/png' },
    body: image,
  });
  const body = await response.json();
  if (!response.ok) throw new Error(`${response.status}: ${JSON.stringify(body)}`);
  const lines = body.lines.map((text) => JSON.parse(text));
  for (const line of lines) {
    const corners = line.box.map(([x, y]) => `${x},${y}`).join(' ');
    console.log(
      `  ${line.text.padEnd(16)} confidence ${line.confidence.toFixed(3)}  ${String(line.orientation).padStart(3)}°  box ${corners}`,
    );
  }
  const asDrawn = lines.length === drawn.length && lines.every((line, i) => line.text === drawn[i].text);
  console.log(asDrawn ? `  all ${drawn.length} lines read as drawn` : '  NOT read as drawn');
  if (!asDrawn) process.exitCode = 1;
} finally {
  console.log('\n== stop');
  await server.stop();
}
