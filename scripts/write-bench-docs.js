// Regenerates the figure blocks of docs/benchmarks.md from benchmarks/results/*.json, the way
// pino regenerates its benchmark tables: the text between `<!-- bench:NAME:start -->` and
// `<!-- bench:NAME:end -->` becomes the figures results/NAME.json renders to (what the script
// printed when it ran); the prose around the blocks is left as it is.
// Usage: npm run docs:bench [-- --check]   --check: exit 1 when the page is out of date
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { renderers } from '../benchmarks/render.js';
import { RESULTS_DIR, ROOT } from '../benchmarks/results.js';

const PAGE = join(ROOT, 'docs/benchmarks.md');
const START = /<!-- bench:([\w-]+):start -->/g;

/**
 * Replaces the text between each pair of markers by `blocks[name]`, markers kept. A start
 * marker without its end, or a name `blocks` lacks, is an error: a block is never dropped.
 */
export function replaceBlocks(markdown, blocks) {
  const names = [...markdown.matchAll(START)].map((match) => match[1]);
  const twice = names.find((name, index) => names.indexOf(name) !== index);
  if (twice) throw new Error(`docs: two blocks named "${twice}"`);
  let text = markdown;
  for (const name of names) {
    const start = `<!-- bench:${name}:start -->`;
    const end = `<!-- bench:${name}:end -->`;
    const from = text.indexOf(start) + start.length;
    const to = text.indexOf(end, from);
    if (to < 0) throw new Error(`docs: ${start} has no ${end}`);
    if (!Object.hasOwn(blocks, name)) throw new Error(`docs: no figures for the block "${name}"`);
    text = `${text.slice(0, from)}\n\n${blocks[name]}\n\n${text.slice(to)}`;
  }
  return text;
}

/** The page with every block rendered from its results file. */
export async function regenerate(markdown) {
  const blocks = {};
  for (const [, name] of markdown.matchAll(START)) {
    const render = renderers[name];
    if (!render) throw new Error(`docs: no benchmark named "${name}" (known: ${Object.keys(renderers).join(', ')})`);
    const result = JSON.parse(await readFile(join(RESULTS_DIR, `${name}.json`), 'utf8'));
    blocks[name] = `\`\`\`text\n${render(result)}\n\`\`\``;
  }
  return replaceBlocks(markdown, blocks);
}

async function main(args) {
  const markdown = await readFile(PAGE, 'utf8');
  const text = await regenerate(markdown);
  if (text === markdown) {
    console.log('docs/benchmarks.md is up to date');
  } else if (args.includes('--check')) {
    console.error('docs/benchmarks.md is out of date: run `npm run docs:bench`');
    process.exitCode = 1;
  } else {
    await writeFile(PAGE, text);
    console.log('rewrote the figure blocks of docs/benchmarks.md');
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main(process.argv.slice(2));
