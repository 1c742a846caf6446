import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { characterClasses, decodeCtc } from '../../../examples/ocr/src/ctc.js';
import { OCR_MODEL_FILES } from '../../../examples/ocr/src/models.js';

const classes = characterClasses('a\nb\n');

/** A [lines, steps, 4] output where each step puts `p` on the named class and the rest evenly. */
function output(lines: readonly (readonly [string, number][])[]): Float32Array {
  return Float32Array.from(
    lines.flatMap((steps) =>
      steps.flatMap(([name, p]) => classes.map((c) => (c === (name === '-' ? '' : name) ? p : (1 - p) / 3))),
    ),
  );
}

test('the classes are blank, the list, then a space', () => {
  assert.deepEqual(classes, ['', 'a', 'b', ' ']);
  assert.deepEqual(characterClasses('a\r\nb'), ['', 'a', 'b', ' ']);
});

test('greedy CTC collapses repeats, drops blanks, and averages the kept steps', () => {
  // "a a - a b b ␣": the blank separates the two a's, the repeated b is one b.
  const probabilities = output([
    [
      ['a', 0.9],
      ['a', 0.5],
      ['-', 0.8],
      ['a', 0.7],
      ['b', 0.6],
      ['b', 0.9],
      [' ', 0.4],
    ],
    [
      ['-', 0.9],
      ['-', 0.9],
      ['-', 0.9],
      ['-', 0.9],
      ['-', 0.9],
      ['-', 0.9],
      ['-', 0.9],
    ],
  ]);
  const [first, empty] = decodeCtc(probabilities, [2, 7, 4], classes);
  assert.equal(first!.text, 'aab ');
  assert.ok(Math.abs(first!.confidence - (0.9 + 0.7 + 0.6 + 0.4) / 4) < 1e-6);
  assert.deepEqual(empty, { text: '', confidence: 0 });
});

test('a character list that does not match the recogniser is refused', () => {
  assert.throws(() => decodeCtc(new Float32Array(5), [1, 1, 5], classes), RangeError);
});

test('ppocr_keys_v1.txt makes the 6625 classes the recogniser outputs', async () => {
  const real = characterClasses(await readFile(OCR_MODEL_FILES.characters, 'utf8'));
  assert.equal(real.length, 6625);
  assert.equal(real.at(-1), ' ');
  assert.ok(['A', 'z', '0', '9'].every((c) => real.includes(c)));
});
