import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';

/** scripts/write-bench-docs.js, plain JavaScript outside the compiled tree. */
interface BenchDocs {
  replaceBlocks(markdown: string, blocks: Record<string, string>): string;
  regenerate(markdown: string): Promise<string>;
}
const ROOT = new URL('../../../', import.meta.url);
const docs = (await import(new URL('scripts/write-bench-docs.js', ROOT).href)) as BenchDocs;

const PAGE = `# Title

Prose before, with \`code\` and a figure typed by hand: 42 ms.

<!-- bench:first:start -->

old figures
spanning lines

<!-- bench:first:end -->

Prose between.
<!-- bench:second:start -->
<!-- bench:second:end -->
Prose after.
`;

test('docs:bench replaces only the text between each pair of markers', () => {
  const text = docs.replaceBlocks(PAGE, { first: 'new figures', second: '```text\nmore\n```' });
  assert.equal(
    text,
    `# Title

Prose before, with \`code\` and a figure typed by hand: 42 ms.

<!-- bench:first:start -->

new figures

<!-- bench:first:end -->

Prose between.
<!-- bench:second:start -->

\`\`\`text
more
\`\`\`

<!-- bench:second:end -->
Prose after.
`,
  );
  assert.equal(docs.replaceBlocks(text, { first: 'new figures', second: '```text\nmore\n```' }), text, 'idempotent');
  assert.equal(docs.replaceBlocks('no markers\n', {}), 'no markers\n');
});

test('docs:bench refuses a block it has no figures for, a missing end marker, a name used twice', () => {
  assert.throws(() => docs.replaceBlocks(PAGE, { first: 'x' }), /no figures for the block "second"/);
  assert.throws(
    () => docs.replaceBlocks('<!-- bench:first:start -->\nx\n', { first: 'y' }),
    /has no <!-- bench:first:end -->/,
  );
  const twice = '<!-- bench:a:start -->\n<!-- bench:a:end -->\n<!-- bench:a:start -->\n<!-- bench:a:end -->\n';
  assert.throws(() => docs.replaceBlocks(twice, { a: 'y' }), /two blocks named "a"/);
});

test('docs/benchmarks.md shows what benchmarks/results/*.json render to', async () => {
  const page = await readFile(new URL('docs/benchmarks.md', ROOT), 'utf8');
  assert.equal(await docs.regenerate(page), page, 'run `npm run docs:bench` after a benchmark');
});
