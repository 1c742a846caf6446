import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { Tensor } from '../../src/core/tensors.js';
import { tensorOf } from '../fixtures/tensors.js';
import { floatToHalf } from '../../src/protocol/binary-tensor.js';
import { classify } from '../../src/protocol/classification.js';

/** The expected answer, written the slow obvious way: sort each row, NaN last, ties by index. */
function reference(values: readonly number[], rows: number, k: number, labels?: readonly string[]): string[] {
  const classes = values.length / rows;
  const out: string[] = [];
  for (let row = 0; row < rows; row++) {
    const ranked = values
      .slice(row * classes, (row + 1) * classes)
      .map((value, index) => ({ value, index }))
      .sort((a, b) => {
        if (Number.isNaN(a.value) !== Number.isNaN(b.value)) return Number.isNaN(a.value) ? 1 : -1;
        return b.value - a.value || a.index - b.index;
      });
    for (const { value, index } of ranked.slice(0, k)) {
      const label = labels?.[index];
      out.push(`${value.toFixed(6)}:${index}${label === undefined ? '' : `:${label}`}`);
    }
  }
  return out;
}

test('property: the top k of every row, best first, matches a full sort (few and many classes, ties, NaN)', () => {
  const score = fc.constantFrom(-1.5, 0, 0.25, 2, 2, 7, NaN, -Infinity, Infinity);
  const matrix = fc
    .record({ rows: fc.integer({ min: 1, max: 4 }), classes: fc.integer({ min: 1, max: 60 }) })
    .chain(({ rows, classes }) =>
      fc.record({
        rows: fc.constant(rows),
        values: fc.array(score, { minLength: rows * classes, maxLength: rows * classes }),
        k: fc.integer({ min: 1, max: classes + 2 }),
        labelled: fc.boolean(),
      }),
    );
  fc.assert(
    fc.property(matrix, ({ rows, values, k, labelled }) => {
      const classes = values.length / rows;
      const labels = labelled ? Array.from({ length: classes - 1 }, (_, i) => `c${i}`) : undefined;
      const tensor = tensorOf('float64', Float64Array.from(values), [rows, classes]);
      const result = classify('scores', tensor, k, labels);
      const kept = Math.min(k, classes);
      assert.equal(result.datatype, 'BYTES');
      assert.deepEqual(result.dims, [rows, kept]);
      assert.deepEqual(result.data, reference(values, rows, kept, labels));
    }),
    { numRuns: 300 },
  );
});

test('with many classes, each row ranks only its own scores, never its neighbour’s', () => {
  // 3 rows of 40 classes, top 2: the cheap path for few-of-many. Each row's best sits at its
  // last class, and the next row opens with a larger score that must not leak in.
  const values = Array.from({ length: 120 }, (_, i) => (i % 40) / 10 + Math.floor(i / 40) * 100);
  const result = classify('scores', tensorOf('float64', Float64Array.from(values), [3, 40]), 2);
  assert.deepEqual(result.data, [
    '3.900000:39',
    '3.800000:38',
    '103.900000:39',
    '103.800000:38',
    '203.900000:39',
    '203.800000:38',
  ]);
});

test('a rank-0 or rank-1 output is one row and answers [k]', () => {
  const scalar = classify('p', tensorOf('float32', Float32Array.of(0.75), []), 3);
  assert.deepEqual([scalar.dims, scalar.data], [[1], ['0.750000:0']]);
  const vector = classify('p', tensorOf('float32', Float32Array.of(0.5, 1, 0.25), [3]), 2, ['a', 'b', 'c']);
  assert.deepEqual([vector.dims, vector.data], [[2], ['1.000000:1:b', '0.500000:0:a']]);
});

test('FP16 scores are read as halves and print as floats; UINT16 ones stay integers', () => {
  const halves = Uint16Array.of(floatToHalf(0.5), floatToHalf(-2), floatToHalf(1.25));
  assert.deepEqual(classify('p', tensorOf('float16', halves, [1, 3]), 3).data, [
    '1.250000:2',
    '0.500000:0',
    '-2.000000:1',
  ]);
  // The same bits as UINT16: 15360 is half 1.0, but a UINT16 output means the integer.
  assert.deepEqual(classify('p', tensorOf('uint16', Uint16Array.of(15360, 48128, 2), [3]), 2).data, [
    '48128:1',
    '15360:0',
  ]);
});

test('a STRING or BOOL output cannot be classified: a 400 naming the output and its type', () => {
  for (const tensor of [tensorOf('string', ['x'], [1]), tensorOf('bool', Uint8Array.of(1, 0), [2])]) {
    assert.throws(
      () => classify('labels_out', tensor, 1),
      (error: Error & { code: string; httpStatus: number }) => {
        assert.equal(error.code, 'BS_ERR_INFERENCE_INPUT');
        assert.equal(error.httpStatus, 400);
        assert.match(error.message, new RegExp(`"labels_out".*${tensor.datatype}`));
        return true;
      },
    );
  }
});

/** A float32 output whose score reads are counted, to see how much work a ranking does. */
function countingScores(n: number): { tensor: Tensor; reads: () => number } {
  const data = Float32Array.from({ length: n }, (_, i) => ((i * 7919) % n) / n);
  let reads = 0;
  const counted = new Proxy(data, {
    get(target, key) {
      if (typeof key === 'string' && /^\d+$/.test(key)) reads += 1;
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? (value as () => unknown).bind(target) : value;
    },
  });
  const tensor = { datatype: 'FP32', dims: [1, n], data: counted } as Tensor;
  return { tensor, reads: () => reads };
}

test('top-5 of 1000 reads each score about once; top-1000 of 1000 sorts instead of inserting one by one', () => {
  const few = countingScores(1000);
  assert.deepEqual(classify('p', few.tensor, 5).data, [
    '0.999000:321',
    '0.998000:642',
    '0.997000:963',
    '0.996000:284',
    '0.995000:605',
  ]);
  assert.ok(few.reads() < 4 * 1000, `top-5 of 1000 read ${few.reads()} scores; a full sort reads ~20000`);
  const all = countingScores(1000);
  assert.equal(classify('p', all.tensor, 1000).data.length, 1000);
  assert.ok(all.reads() < 60_000, `top-1000 of 1000 read ${all.reads()} scores; insertion reads ~500000`);
});
