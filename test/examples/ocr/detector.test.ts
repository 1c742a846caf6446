import { test } from 'node:test';
import assert from 'node:assert/strict';
import { detectorInput, detectorSize } from '../../../examples/ocr/src/detector-input.js';
import { boxesFromProbabilityMap, inReadingOrder } from '../../../examples/ocr/src/detector-output.js';
import type { Quad } from '../../../examples/ocr/src/geometry.js';
import type { ProbabilityMap } from '../../../examples/ocr/src/regions.js';

test('the detector sees sides rounded to multiples of 32, the long side at most 960, never enlarged', () => {
  assert.deepEqual(detectorSize(100, 50), { width: 96, height: 64 });
  assert.deepEqual(detectorSize(10, 10), { width: 32, height: 32 });
  assert.deepEqual(detectorSize(2000, 1000), { width: 960, height: 480 });
  assert.deepEqual(detectorSize(1000, 3000), { width: 320, height: 960 });
});

test('the detector input is NCHW in B, G, R order with ImageNet mean and std', () => {
  // A 32 × 32 image of one colour: R 255, G 0, B 51.
  const data = new Uint8Array(32 * 32 * 4);
  for (let i = 0; i < 32 * 32; i++) data.set([255, 0, 51, 255], i * 4);
  const input = detectorInput({ width: 32, height: 32, data });
  assert.deepEqual(input.dims, [1, 3, 32, 32]);
  const plane = 32 * 32;
  const close = (actual: number, expected: number): void => assert.ok(Math.abs(actual - expected) < 1e-5, `${actual}`);
  close(input.data[0]!, (0.2 - 0.485) / 0.229);
  close(input.data[plane]!, (0 - 0.456) / 0.224);
  close(input.data[2 * plane + 100]!, (1 - 0.406) / 0.225);
});

function mapWith(width: number, height: number, blocks: readonly [number, number, number, number, number][]) {
  const data = new Float32Array(width * height);
  for (const [left, top, right, bottom, probability] of blocks) {
    for (let y = top; y <= bottom; y++) for (let x = left; x <= right; x++) data[y * width + x] = probability;
  }
  return { width, height, data } satisfies ProbabilityMap;
}

test('a confident region becomes its grown rectangle, scaled to the image', () => {
  // Pixel centres 10..49 × 10..19: a 39 × 9 rectangle, grown by 39 × 9 × 1.5 / 96 on each
  // side, then doubled into the 128 × 64 image and rounded.
  const map = mapWith(64, 32, [[10, 10, 49, 19, 0.9]]);
  const boxes = boxesFromProbabilityMap(map, 128, 64);
  assert.equal(boxes.length, 1);
  assert.deepEqual(boxes[0]!.box, [
    [9, 9],
    [109, 9],
    [109, 49],
    [9, 49],
  ]);
  assert.ok(Math.abs(boxes[0]!.score - 0.9) < 1e-6);
});

test('regions scored under box_thresh or thinner than 3 pixels are dropped; boxes stop at the edge', () => {
  const map = mapWith(64, 32, [
    [2, 2, 30, 8, 0.5], // above thresh 0.3, under box_thresh 0.6
    [40, 2, 60, 3, 0.9], // two pixels high: short side 1
    [10, 20, 50, 28, 0.95],
  ]);
  const boxes = boxesFromProbabilityMap(map, 64, 32);
  assert.equal(boxes.length, 1);
  // 40 × 8 grows by 40 × 8 × 1.5 / 96 = 5 on each side, and past the bottom: clipped there.
  assert.deepEqual(boxes[0]!.box, [
    [5, 15],
    [55, 15],
    [55, 31],
    [5, 31],
  ]);
});

test('boxes come top to bottom, and left to right when their tops are within 10 pixels', () => {
  const at = (x: number, y: number): { box: Quad; name: string } => ({
    name: `${x},${y}`,
    box: [
      [x, y],
      [x + 5, y],
      [x + 5, y + 5],
      [x, y + 5],
    ],
  });
  const ordered = inReadingOrder([at(50, 100), at(10, 104), at(0, 40), at(30, 200), at(5, 195)]);
  assert.deepEqual(
    ordered.map((box) => box.name),
    ['0,40', '10,104', '50,100', '5,195', '30,200'],
  );
});
