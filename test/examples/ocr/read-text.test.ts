import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { loadOcrSessions, releaseOcrSessions, type OcrSessions } from '../../../examples/ocr/src/models.js';
import { readText } from '../../../examples/ocr/src/read-text.js';
import { renderTextPng, type TextToDraw } from './render-text.js';

// Strings without spaces: PP-OCRv4's Chinese recogniser often joins English words whose gaps
// are narrow (it read "HELLO WORLD 2024" as "HELLOWORLD2024" at 20 to 40 px), while every
// letter and digit read right at every size tried.
const LINES: readonly TextToDraw[] = [
  { text: 'Batchserve', x: 24, baseline: 48, size: 32 },
  { text: 'HELLO2024', x: 24, baseline: 108, size: 32 },
  { text: 'Invoice4096', x: 40, baseline: 168, size: 32, upsideDown: true },
  { text: 'pipelines8', x: 24, baseline: 228, size: 32 },
];

let sessions: OcrSessions;
before(async () => {
  sessions = await loadOcrSessions();
});
after(async () => {
  await releaseOcrSessions(sessions);
});

test('reads rendered lines in order, turning the upside-down one', async () => {
  const lines = await readText(renderTextPng(360, 250, LINES), sessions);
  assert.deepEqual(
    lines.map((line) => [line.text, line.orientation]),
    LINES.map((drawn) => [drawn.text, drawn.upsideDown ? 180 : 0]),
  );
  lines.forEach((line, i) => {
    const drawn = LINES[i]!;
    const [topLeft, , , bottomLeft] = line.box;
    assert.ok(line.confidence > 0.9, `${line.text}: confidence ${line.confidence}`);
    // The box starts near where the text was drawn and spans its baseline.
    assert.ok(Math.abs(topLeft[0] - drawn.x) < 8, `${line.text}: box starts at x ${topLeft[0]}`);
    assert.ok(
      topLeft[1] < drawn.baseline - 16 && bottomLeft[1] > drawn.baseline - 4,
      `${line.text}: box ${JSON.stringify(line.box)}`,
    );
  });
});

test('an image with no text has no lines', async () => {
  assert.deepEqual(await readText(renderTextPng(200, 100, []), sessions), []);
});
