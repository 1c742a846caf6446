import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connectedRegions, type ProbabilityMap } from '../../../examples/ocr/src/regions.js';

/** A map from rows of digits: each digit d is the probability d / 10. */
function mapOf(rows: readonly string[]): ProbabilityMap {
  const width = rows[0]!.length;
  const data = Float32Array.from(rows.join(''), (digit) => Number(digit) / 10);
  return { width, height: rows.length, data };
}

const map = mapOf([
  '99000000', //
  '09000090',
  '00900090',
  '00000000',
  '90000333',
]);

test('pixels above the threshold form 8-connected regions, outlined by each row’s ends', () => {
  const regions = connectedRegions(map, 0.5);
  assert.deepEqual(regions, [
    // Diagonal neighbours join: (1,1) and (2,2) belong with the top-left pair.
    {
      outline: [
        [0, 0],
        [1, 0],
        [1, 1],
        [2, 2],
      ],
      pixels: 4,
    },
    {
      outline: [
        [6, 1],
        [6, 2],
      ],
      pixels: 2,
    },
    { outline: [[0, 4]], pixels: 1 },
  ]);
});

test('a pixel exactly at the threshold is not text', () => {
  // The map holds float32, so the threshold is the float32 nearest 0.3, as the 3s are.
  assert.equal(connectedRegions(map, Math.fround(0.3)).length, 3);
  assert.equal(connectedRegions(map, 0.2).length, 4);
  assert.deepEqual(connectedRegions(map, 0.2)[3], {
    outline: [
      [5, 4],
      [7, 4],
    ],
    pixels: 3,
  });
});

test('at most `limit` regions are returned', () => {
  assert.equal(connectedRegions(map, 0.5, 2).length, 2);
});
