import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mismatch, shellBlocks } from './shell-blocks.js';

const page = [
  '# A page',
  '',
  '<!-- docs-test: skip (needs kubectl',
  '  and a cluster) -->',
  '',
  '```sh',
  'kubectl apply -f x.yaml',
  '```',
  '',
  '<!-- docs-test: before',
  'touch model.onnx',
  '-->',
  '',
  '```sh',
  '# a comment is prose',
  'batchserve model-archive pack --model-name m \\',
  '  --serialized-file model.onnx   # → packed …/m.mar',
  'for v in 1 2; do',
  '  echo $v',
  'done',
  '# → 1',
  '# → 2',
  'cat report.txt',
  '```',
  '',
  '```text',
  'report',
  '```',
  '',
  '```yaml',
  'not: a shell block',
  '```',
].join('\n');

test('shell blocks: commands whole (continuations, compound commands), markers, shown output inline, after, and in a text block', () => {
  const [skipped, run, ...rest] = shellBlocks(page);
  assert.deepEqual(rest, []);
  assert.equal(skipped?.skip, 'needs kubectl and a cluster');
  assert.equal(skipped?.line, 6);
  assert.equal(run?.before, 'touch model.onnx');
  assert.deepEqual(
    run?.commands.map(({ line, shown }) => ({ line, shown })),
    [
      { line: 16, shown: ['packed …/m.mar'] },
      { line: 18, shown: ['1', '2'] },
      { line: 23, shown: ['report'] },
    ],
  );
  assert.equal(run?.commands[1]?.text, 'for v in 1 2; do\n  echo $v\ndone');
});

test('shell blocks: a marker that is neither skip nor before, a block that never closes, output before any command are refused', () => {
  assert.throws(() => shellBlocks('<!-- docs-test: maybe -->\n```sh\nls\n```'), /is "skip \(reason\)" or "before"/);
  assert.throws(() => shellBlocks('```sh\nls\n'), /never closes/);
  assert.throws(() => shellBlocks('```sh\n# → x\nls\n```'), /shown output before any command/);
});

test('shown output: … is any text, decimals any number, whole numbers exact, spaces and table rules loose, lines in order', () => {
  const output = [
    'scored 40 rows in 0.31 s (277 rows/s): 40 records → /tmp/x/predictions.jsonl',
    '│ softmax │ 0.0270   │ 95.3 % │',
    '┌──────────┬────┐',
    '200',
  ].join('\n');
  assert.equal(mismatch(['scored 40 rows in 0.3 s (… rows/s): 40 records → …/predictions.jsonl'], output), undefined);
  assert.equal(mismatch(['│ softmax │ 0.0276 │ 95.3 % │', '┌─────┬───────┐', '200'], output), undefined);
  assert.equal(mismatch(['…', '200'], output), undefined);
  assert.match(mismatch(['scored 41 rows in … s (… rows/s): …'], output) ?? '', /no line of the output is/);
  assert.match(mismatch(['201'], output) ?? '', /"201"/);
  assert.match(mismatch(['200', '┌─┬─┐'], output) ?? '', /after the last one matched/);
  assert.match(mismatch(['0'], output) ?? '', /no line/, 'a whole line, not a part of one');
});
