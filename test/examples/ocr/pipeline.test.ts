import { test } from 'node:test';
import assert from 'node:assert/strict';
import { packOcrPipeline, servedModels } from '../../../examples/ocr/pipeline/pack.js';
import { call, startTestServer } from '../../fixtures/server.js';
import { tempDir } from '../../fixtures/temp.js';
import { renderTextPng, type TextToDraw } from './render-text.js';

/**
 * The OCR example end to end: its four archives packed by the same code as the demo and the
 * benchmark, served by the real server, sent rendered PNGs over /predictions and v2 binary.
 */
const FOUR_LINES: readonly TextToDraw[] = [
  { text: 'Batchserve', x: 24, baseline: 48, size: 32 },
  { text: 'HELLO2024', x: 24, baseline: 108, size: 32 },
  { text: 'Invoice4096', x: 40, baseline: 168, size: 32, upsideDown: true },
  { text: 'pipelines8', x: 24, baseline: 228, size: 32 },
];
const WORDS = ['Tensor42', 'QUEUE77', 'Recogniser', 'LATENCY9', 'Batchserve', 'pipelines8', 'HELLO2024', 'Invoice4096'];
/** Image i of the concurrent ones: three lines, the last upside down in every other image. */
const threeLines = (i: number): TextToDraw[] =>
  [0, 1, 2].map((line) => ({
    text: WORDS[(i + line * 3) % WORDS.length]!,
    x: 24,
    baseline: 48 + line * 60,
    size: 32,
    upsideDown: line === 2 && i % 2 === 1,
  }));

interface Line {
  text: string;
  confidence: number;
  box: [number, number][];
  orientation: number;
}
const parsed = (lines: readonly string[]): Line[] => lines.map((line) => JSON.parse(line) as Line);
const read = (lines: readonly Line[]): [string, number][] => lines.map((line) => [line.text, line.orientation]);
const expected = (drawn: readonly TextToDraw[]): [string, number][] =>
  drawn.map((line) => [line.text, line.upsideDown ? 180 : 0]);

/** A v2 binary infer body: one BYTES element, its 4-byte little-endian length then its bytes. */
function binaryInfer(image: Buffer): { body: Buffer; headers: Record<string, string> } {
  const element = Buffer.concat([Buffer.alloc(4), image]);
  element.writeUInt32LE(image.length, 0);
  const header = Buffer.from(
    JSON.stringify({
      inputs: [{ name: 'image', datatype: 'BYTES', shape: [1], parameters: { binary_data_size: element.length } }],
      outputs: [{ name: 'lines' }],
    }),
  );
  return {
    body: Buffer.concat([header, element]),
    headers: {
      'content-type': 'application/octet-stream',
      'inference-header-content-length': String(header.length),
    },
  };
}

test('the OCR pipeline, served, reads rendered text and batches lines across requests', async (t) => {
  const archives = await packOcrPipeline(await tempDir(t, 'batchserve-ocr-'));
  const server = await startTestServer(t, { models: servedModels(archives) });
  const base = server.urls.inference;
  const predict = (image: Buffer) =>
    call(`${base}/predictions/ocr`, { body: image, headers: { 'content-type': 'image/png' } });

  await t.test('/predictions/ocr answers one JSON line per text line, the upside-down one turned', async () => {
    const answer = await predict(renderTextPng(360, 250, FOUR_LINES));
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    const lines = parsed(answer.body.lines);
    assert.deepEqual(read(lines), expected(FOUR_LINES));
    for (const line of lines) {
      assert.ok(line.confidence > 0.9, `${line.text}: confidence ${line.confidence}`);
      assert.equal(line.box.length, 4);
    }
  });

  await t.test('v2 infer takes the image as a binary BYTES tensor', async () => {
    const { body, headers } = binaryInfer(renderTextPng(360, 250, FOUR_LINES));
    const answer = await call(`${base}/v2/models/ocr/infer`, { body, headers });
    assert.equal(answer.status, 200, String(answer.body));
    const [output] = answer.body.outputs;
    assert.equal(output.name, 'lines');
    assert.equal(output.datatype, 'BYTES');
    assert.deepEqual(output.shape, [FOUR_LINES.length]);
    assert.deepEqual(read(parsed(output.data)), expected(FOUR_LINES));
  });

  await t.test('an image without text has no lines; a body that is no image is the client’s error', async () => {
    const blank = await predict(renderTextPng(200, 100, []));
    assert.equal(blank.status, 200);
    assert.deepEqual(blank.body.lines, []);
    const garbage = await predict(Buffer.from('not a picture'));
    assert.equal(garbage.status, 400);
    assert.equal(garbage.body.code, 'BS_ERR_INFERENCE_INPUT');
    assert.match(garbage.body.error, /prepare/);
  });

  await t.test('under concurrency the recogniser runs lines of several images in one pass', async () => {
    const images = Array.from({ length: 8 }, (_, i) => threeLines(i));
    const answers = await Promise.all(images.map((drawn) => predict(renderTextPng(360, 200, drawn))));
    answers.forEach((answer, i) => {
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      assert.deepEqual(read(parsed(answer.body.lines)), expected(images[i]!), `image ${i}`);
    });
    const stats = (await call(`${base}/v2/models/ocr-rec/stats`)).body.model_stats[0];
    const largest = Math.max(...stats.batch_stats.map((entry: { batch_size: number }) => entry.batch_size));
    assert.ok(largest > 3, `the largest ocr-rec batch held ${largest} lines; one image has 3`);
  });
});
