import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate as nextTurn } from 'node:timers/promises';
import fc from 'fast-check';
import type { DatasetRow, ReadyRow } from '../../src/predict/dataset.js';
import { ReorderWindow, streamRows, type RowOutcome } from '../../src/predict/row-stream.js';

const record = (id: string) => ({ id, model: 'm', version: '1', outputs: undefined, answer: 'null' });

/**
 * Rows `[from, to)`; every `failEvery`-th is a row the input could not make into a request,
 * and rows at multiples of 7 start a chunk of up to 3 rows in one request.
 */
async function* rows(
  from: number,
  to: number,
  read: number[],
  failEvery = 0,
  failed = new Set<number>(),
): AsyncGenerator<DatasetRow> {
  for (let row = from; row < to;) {
    read.push(row);
    await nextTurn();
    if (failEvery > 0 && row % failEvery === 0) {
      failed.add(row);
      yield { row, id: String(row), failure: { reason: 'bad', code: 'BS_ERR_INFERENCE_INPUT' } };
      row += 1;
      continue;
    }
    const count = row % 7 === 0 ? Math.min(3, to - row) : 1;
    const ids = Array.from({ length: count }, (_, index) => String(row + index));
    const chunk = count > 1 ? { chunk: { count, ids, split: () => Promise.resolve([]) } } : {};
    yield {
      row,
      id: String(row),
      request: { kind: 'texts', texts: [] },
      rows: count === 1 ? 1 + (row % 3) : count,
      shapeKey: '',
      ...chunk,
    };
    row += count;
  }
}

/** The outcomes of a request: one record per input row it carries. */
const answers = (row: ReadyRow): RowOutcome[] =>
  (row.chunk?.ids ?? [row.id]).map((id, index) => ({ row: row.row + index, record: record(id) }));

test('rows answered in any order are delivered in input order, with bounded in-flight rows and window', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 0, max: 60 }),
      fc.integer({ min: 0, max: 20 }),
      fc.integer({ min: 3, max: 12 }),
      fc.integer({ min: 1, max: 4 }),
      fc.integer({ min: 0, max: 5 }),
      fc.infiniteStream(fc.nat()),
      async (count, from, maxInFlight, windowFactor, failEvery, picks) => {
        const to = from + count;
        const window = maxInFlight * windowFactor;
        const read: number[] = [];
        const failed = new Set<number>();
        const delivered: RowOutcome[] = [];
        const pending: (() => void)[] = [];
        let inFlight = 0;
        let mostInFlight = 0;
        const choices = picks[Symbol.iterator]();
        let running = true;
        // Answers the submitted rows in an order the property picks.
        const answering = (async () => {
          while (running) {
            await nextTurn();
            if (pending.length === 0) continue;
            const [answer] = pending.splice((choices.next().value as number) % pending.length, 1);
            answer?.();
          }
        })();
        await streamRows({
          rows: rows(from, to, read, failEvery, failed),
          from,
          to,
          maxInFlight,
          window,
          score: (row) => {
            inFlight += row.rows;
            mostInFlight = Math.max(mostInFlight, inFlight);
            return new Promise((resolve) =>
              pending.push(() => {
                inFlight -= row.rows;
                resolve(answers(row));
              }),
            );
          },
          deliver: async (outcome) => {
            assert.ok(read.length - delivered.length <= window + 1, 'reading stays within the window');
            delivered.push(outcome);
          },
        });
        running = false;
        await answering;
        assert.deepEqual(
          delivered.map((outcome) => outcome.row),
          Array.from({ length: count }, (_, i) => from + i),
        );
        delivered.forEach((outcome) => assert.equal('failure' in outcome, failed.has(outcome.row)));
        assert.ok(mostInFlight <= Math.max(maxInFlight, 3), `${mostInFlight} rows in flight`);
      },
    ),
    { numRuns: 60 },
  );
});

test('a failing writer stops the reading at once and its error is thrown', async () => {
  const read: number[] = [];
  await assert.rejects(
    streamRows({
      rows: rows(0, 10_000, read),
      from: 0,
      to: 10_000,
      maxInFlight: 4,
      window: 8,
      score: async (row) => answers(row),
      deliver: async (outcome) => {
        if (outcome.row === 20) throw new Error('disk full');
      },
    }),
    /disk full/,
  );
  assert.ok(read.length < 40, `read ${read.length} rows`);
});

test('an input that skips or loses rows is an error, not a silent gap', async () => {
  async function* skipping(): AsyncGenerator<DatasetRow> {
    yield { row: 0, id: '0', request: { kind: 'texts', texts: [] }, rows: 1, shapeKey: '' };
    yield { row: 2, id: '2', request: { kind: 'texts', texts: [] }, rows: 1, shapeKey: '' };
  }
  const run = (to: number) =>
    streamRows({
      rows: skipping(),
      from: 0,
      to,
      maxInFlight: 4,
      window: 8,
      score: async (row) => answers(row),
      deliver: async () => undefined,
    });
  await assert.rejects(run(3), /gave row 2 where row 1 was due/);
});

test('the reorder window takes values strictly in order and refuses rows outside it', () => {
  const window = new ReorderWindow<string>(3, 10);
  window.put(12, 'c');
  window.put(11, 'b');
  assert.equal(window.take(), undefined, 'row 10 is not there yet');
  assert.equal(window.hasRoomFor(13), false);
  window.put(10, 'a');
  assert.deepEqual([window.take(), window.take(), window.take(), window.take()], ['a', 'b', 'c', undefined]);
  assert.equal(window.next, 13);
  assert.throws(() => window.put(12, 'late'), RangeError);
  assert.throws(() => window.put(16, 'early'), RangeError);
});
