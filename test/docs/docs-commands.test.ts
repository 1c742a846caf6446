import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { REPO } from './page-shell.js';
import { runPage } from './run-page.js';

// Each page of docs/ with shell blocks, its own shell and server (README.md: readme-commands.test.ts).
const pages = readdirSync(join(REPO, 'docs'))
  .filter((name) => name.endsWith('.md'))
  .sort()
  .map((name) => `docs/${name}`)
  .filter((page) => /^```(?:sh|bash|shell)\s*$/m.test(readFileSync(join(REPO, page), 'utf8')));

for (const page of pages) {
  test(`${page}: every shell block runs as written, or says why not`, (t) => runPage(t, page));
}
