import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  convexHull,
  cornersOf,
  insideQuad,
  minAreaRectangle,
  unclip,
  type Point,
  type Quad,
} from '../../../examples/ocr/src/geometry.js';

const near = (actual: number, expected: number, what: string): void =>
  assert.ok(Math.abs(actual - expected) < 1e-9, `${what}: ${actual}, expected ${expected}`);

const nearQuad = (actual: Quad, expected: Quad): void =>
  actual.forEach((point, i) => {
    near(point[0], expected[i]![0], `corner ${i} x`);
    near(point[1], expected[i]![1], `corner ${i} y`);
  });

test('the convex hull keeps the corners and drops inner and collinear points', () => {
  const hull = convexHull([
    [0, 0],
    [2, 0],
    [4, 0],
    [4, 3],
    [2, 1],
    [0, 3],
    [0, 3],
  ]);
  assert.deepEqual(
    [...hull].sort((a, b) => a[0] - b[0] || a[1] - b[1]),
    [
      [0, 0],
      [0, 3],
      [4, 0],
      [4, 3],
    ],
  );
});

test('the minimum rectangle of an axis-aligned block is the block', () => {
  const points: Point[] = [];
  for (let y = 5; y <= 8; y++) for (let x = 10; x <= 20; x++) points.push([x, y]);
  const rect = minAreaRectangle(points);
  near(Math.max(rect.width, rect.height), 10, 'long side');
  near(Math.min(rect.width, rect.height), 3, 'short side');
  nearQuad(cornersOf(rect), [
    [10, 5],
    [20, 5],
    [20, 8],
    [10, 8],
  ]);
});

test('the minimum rectangle of a rotated rectangle finds its sides and its corners', () => {
  // A 10 × 4 rectangle turned 30°, given by its corners and some points inside.
  const angle = Math.PI / 6;
  const along: Point = [Math.cos(angle), Math.sin(angle)];
  const across: Point = [-Math.sin(angle), Math.cos(angle)];
  const at = (u: number, v: number): Point => [50 + u * along[0] + v * across[0], 50 + u * along[1] + v * across[1]];
  const corners = [at(-5, -2), at(5, -2), at(5, 2), at(-5, 2)];
  const rect = minAreaRectangle([...corners, at(0, 0), at(3, 1), at(-4, -1.5)]);
  near(rect.width * rect.height, 40, 'area');
  near(Math.max(rect.width, rect.height), 10, 'long side');
  // Reading order: of the two leftmost corners the upper is top-left, and so on the right.
  nearQuad(cornersOf(rect), [at(-5, -2), at(5, -2), at(5, 2), at(-5, 2)]);
});

test('a diamond (a square turned 45°) has sides of √2 × its half-diagonal', () => {
  const rect = minAreaRectangle([
    [0, 1],
    [1, 0],
    [2, 1],
    [1, 2],
  ]);
  near(rect.width, Math.SQRT2, 'width');
  near(rect.height, Math.SQRT2, 'height');
});

test('the rectangle of a single point or a segment has no area', () => {
  const dot = minAreaRectangle([[3, 4]]);
  assert.deepEqual([dot.width, dot.height, dot.center], [0, 0, [3, 4]]);
  const segment = minAreaRectangle([
    [0, 0],
    [6, 8],
  ]);
  near(Math.max(segment.width, segment.height), 10, 'length');
  near(Math.min(segment.width, segment.height), 0, 'thickness');
  assert.throws(() => minAreaRectangle([]), RangeError);
});

test('unclip grows each side by area × ratio / perimeter', () => {
  // 10 × 4: area 40, perimeter 28, so 40 × 1.5 / 28 on each side.
  const grown = unclip({ center: [0, 0], axis: [1, 0], width: 10, height: 4 }, 1.5);
  const grow = (40 * 1.5) / 28;
  near(grown.width, 10 + 2 * grow, 'width');
  near(grown.height, 4 + 2 * grow, 'height');
  assert.deepEqual(grown.center, [0, 0]);
  const flat = { center: [0, 0] as Point, axis: [1, 0] as Point, width: 0, height: 0 };
  assert.equal(unclip(flat, 1.5), flat);
});

test('insideQuad counts the edge as inside', () => {
  const square: Quad = [
    [0, 0],
    [4, 0],
    [4, 4],
    [0, 4],
  ];
  assert.equal(insideQuad(square, [2, 2]), true);
  assert.equal(insideQuad(square, [4, 2]), true);
  assert.equal(insideQuad(square, [4.01, 2]), false);
  assert.equal(insideQuad(square, [-1, -1]), false);
});
