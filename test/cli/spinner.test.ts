import { test } from 'node:test';
import assert from 'node:assert/strict';
import { clearLine, cursorTo, moveCursor } from 'node:readline';
import { Writable } from 'node:stream';
import { canRedraw, startSpinner, type SpinnerStream } from '../../src/cli/spinner.js';

/** A stream that says it is a terminal of `columns` columns, and counts what is written to it. */
function terminal(columns: number | undefined): SpinnerStream & { written: number } {
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      stream.written += chunk.length;
      done();
    },
  }) as Writable & { written: number; isTTY: boolean; columns: number | undefined };
  // What a tty.WriteStream adds, which ora calls: the same escape codes, through readline.
  Object.assign(stream, {
    written: 0,
    isTTY: true,
    columns,
    cursorTo: (x: number, y?: number) => cursorTo(stream, x, y),
    moveCursor: (dx: number, dy: number) => moveCursor(stream, dx, dy),
    clearLine: (dir: -1 | 0 | 1) => clearLine(stream, dir),
  });
  return stream;
}

test('only a terminal that knows its width is redrawn in place', () => {
  assert.equal(canRedraw({ ...terminal(80) }), true);
  assert.equal(canRedraw(terminal(0)), false, 'a pseudo-terminal of 0 columns');
  assert.equal(canRedraw(terminal(undefined)), false, 'a width nobody reported');
  assert.equal(canRedraw(Object.assign(terminal(80), { isTTY: false })), false, 'a pipe');
});

test('a 0-column pseudo-terminal gets no escape codes at all (it got 27 MB in 2 s, issue #16)', () => {
  for (const columns of [0, undefined]) {
    const stream = terminal(columns);
    const spinner = startSpinner('starting', stream);
    for (let i = 0; i < 1000; i++) spinner.text = `[${i + 1}/1000] B=8 delay 2ms ×1, concurrency 16 — 812 req/s`;
    spinner.stop();
    assert.equal(stream.written, 0, `${String(columns)} columns`);
  }
  // The same spinner on an 80-column terminal does draw: the check above is not vacuous.
  const wide = terminal(80);
  startSpinner('starting', wide).stop();
  assert.ok(wide.written > 0 && wide.written < 1000, `${wide.written} bytes`);
});
