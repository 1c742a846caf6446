// Sends the demo model a rendered text line, upright and upside down, through both protocols,
// and prints what the server answers. Usage: node scripts/demo-client.js http://127.0.0.1:PORT
import { PNG } from 'pngjs';
import { request } from 'undici';

const base = process.argv[2];
if (!base) throw new Error('usage: node scripts/demo-client.js <inference-url>');

/** A 192×48 "text line": dark glyph-like strokes on white, with ascenders at the top. */
function textLine(upsideDown) {
  const width = 192;
  const height = 48;
  const image = new PNG({ width, height });
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const [sx, sy] = upsideDown ? [width - 1 - x, height - 1 - y] : [x, y];
      const glyph = sx % 14 < 9 && sy > 18 && sy < 38;
      const ascender = sx % 28 < 3 && sy > 6 && sy <= 18;
      const ink = (glyph && (sx % 14 < 2 || sy < 21 || sy > 35)) || ascender;
      image.data.set(ink ? [25, 25, 25, 255] : [245, 245, 240, 255], (y * width + x) * 4);
    }
  }
  return PNG.sync.write(image);
}

for (const [label, upsideDown] of [
  ['upright line', false],
  ['upside-down line', true],
]) {
  const response = await request(`${base}/predictions/orientation`, {
    method: 'POST',
    headers: { 'content-type': 'image/png' },
    body: textLine(upsideDown),
  });
  console.log(`POST /predictions/orientation (${label}) → ${response.statusCode} ${await response.body.text()}`);
}

const zeros = new Array(3 * 48 * 192).fill(0);
const v2 = await request(`${base}/v2/models/orientation/infer`, {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({
    inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3, 48, 192], data: zeros }],
    outputs: [{ name: 'softmax_0.tmp_0', parameters: { classification: 2 } }],
  }),
});
console.log(
  `POST /v2/models/orientation/infer (blank tensor, classification) → ${v2.statusCode} ${await v2.body.text()}`,
);
