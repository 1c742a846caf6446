// Sends the demo model a rendered text line, upright and upside down, through both protocols,
// and prints what the server answers. Usage: node scripts/demo-client.js http://127.0.0.1:PORT
import { request } from 'undici';
import { textLine } from './text-line.js';

const base = process.argv[2];
if (!base) throw new Error('usage: node scripts/demo-client.js <inference-url>');

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
