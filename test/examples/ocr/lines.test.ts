import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { RgbaImage } from '../../../src/handlers/image.js';
import { cropLine, rotateHalfTurn } from '../../../examples/ocr/src/line-crop.js';
import { CLASSIFIER_WIDTH, lineBatch, recognizerWidth } from '../../../examples/ocr/src/line-input.js';
import { isUpsideDown, orientationsOf } from '../../../examples/ocr/src/orientation.js';

/** An image whose red channel is x, green y, blue 7: every pixel says where it came from. */
function coordinates(width: number, height: number): RgbaImage {
  const data = new Uint8Array(width * height * 4);
  for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) data.set([x, y, 7, 255], (y * width + x) * 4);
  return { width, height, data };
}

const pixel = (image: RgbaImage, x: number, y: number): number[] => [
  ...image.data.subarray((y * image.width + x) * 4, (y * image.width + x) * 4 + 4),
];

test('an axis-aligned box crops to exactly its pixels', () => {
  const line = cropLine(coordinates(40, 20), [
    [5, 3],
    [25, 3],
    [25, 13],
    [5, 13],
  ]);
  assert.deepEqual([line.width, line.height], [20, 10]);
  assert.deepEqual(pixel(line, 0, 0), [5, 3, 7, 255]);
  assert.deepEqual(pixel(line, 19, 9), [24, 12, 7, 255]);
});

test('a tilted box comes out straight, and a tall one is turned a quarter turn', () => {
  // A box along the diagonal: its top edge runs from (10, 0) to (20, 10).
  const tilted = cropLine(coordinates(40, 40), [
    [10, 0],
    [20, 10],
    [15, 15],
    [5, 5],
  ]);
  assert.deepEqual([tilted.width, tilted.height], [14, 7]);
  assert.deepEqual(pixel(tilted, 0, 0), [10, 0, 7, 255]);
  assert.deepEqual(pixel(tilted, 7, 0), [15, 5, 7, 255]);

  const tall = cropLine(coordinates(40, 40), [
    [0, 0],
    [4, 0],
    [4, 30],
    [0, 30],
  ]);
  assert.deepEqual([tall.width, tall.height], [30, 4]);
  // Counter-clockwise: the box's top-right corner ends up top-left.
  assert.deepEqual(pixel(tall, 0, 0), [3, 0, 7, 255]);
  assert.deepEqual(pixel(tall, 29, 3), [0, 29, 7, 255]);
});

test('a half turn swaps opposite corners', () => {
  const turned = rotateHalfTurn(coordinates(3, 2));
  assert.deepEqual(pixel(turned, 0, 0), [2, 1, 7, 255]);
  assert.deepEqual(pixel(turned, 2, 1), [0, 0, 7, 255]);
});

test('lines are batched 48 high at their own aspect ratio, normalised, in B, G, R, padded with zeros', () => {
  const white = (width: number, height: number): RgbaImage => ({
    width,
    height,
    data: new Uint8Array(width * height * 4).fill(255),
  });
  const lines = [white(100, 24), white(50, 50), white(1000, 10)];
  assert.equal(recognizerWidth(lines), 1600);
  assert.equal(recognizerWidth(lines.slice(0, 2)), 320);
  const batch = lineBatch(lines, CLASSIFIER_WIDTH);
  assert.deepEqual(batch.dims, [3, 3, 48, 192]);
  const at = (n: number, c: number, y: number, x: number): number => batch.data[((n * 3 + c) * 48 + y) * 192 + x]!;
  // The 100 × 24 line is 200 wide at height 48, squeezed into 192; the square one 48 wide.
  assert.equal(at(0, 0, 0, 191), 1);
  assert.equal(at(1, 2, 47, 47), 1);
  assert.equal(at(1, 2, 47, 48), 0);

  const colour = { width: 1, height: 1, data: Uint8Array.from([255, 0, 51, 255]) };
  const single = lineBatch([colour], 320);
  assert.deepEqual(
    [single.data[0], single.data[48 * 320], single.data[2 * 48 * 320]].map((v) => Math.round(v! * 1000) / 1000),
    [-0.6, -1, 1],
  );
});

test('the orientation is the likelier label, and only a confident 180° turns a line', () => {
  const orientations = orientationsOf(Float32Array.from([0.8, 0.2, 0.05, 0.95, 0.15, 0.85]), 3);
  assert.deepEqual(
    orientations.map((o) => [o.angle, Math.round(o.score * 100) / 100]),
    [
      [0, 0.8],
      [180, 0.95],
      [180, 0.85],
    ],
  );
  assert.deepEqual(
    orientations.map((o) => isUpsideDown(o)),
    [false, true, false],
  );
});
