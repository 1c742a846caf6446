import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

// Every relative link in README.md and docs/ resolves: the file (or folder) exists, and a
// `#fragment` names a heading of the page it points to, as GitHub makes its anchors.

const REPO = fileURLToPath(new URL('../../../', import.meta.url));

const pages = [
  join(REPO, 'README.md'),
  ...readdirSync(join(REPO, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => join(REPO, 'docs', name)),
];

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
export function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[`*]/g, '')
    .replace(/[^\p{L}\p{N}_\- ]/gu, '')
    .replace(/ /g, '-');
}

/** The page's text outside fenced code blocks. */
function prose(text: string): string {
  return text.replace(/^```[\s\S]*?^```/gm, '');
}

function anchorsOf(file: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const match of prose(readFileSync(file, 'utf8')).matchAll(/^#+ (.+)$/gm)) {
    const base = anchorOf(match[1] as string);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

test('every relative link in README.md and docs/ resolves, file and heading', () => {
  const broken: string[] = [];
  let checked = 0;
  for (const page of pages) {
    for (const match of prose(readFileSync(page, 'utf8')).matchAll(/\[[^\]]*\]\(([^)\s]+)\)/g)) {
      const target = match[1] as string;
      if (/^[a-z][a-z+.-]*:/i.test(target)) continue;
      checked += 1;
      const [path = '', fragment] = target.split('#');
      const file = path === '' ? page : join(dirname(page), decodeURIComponent(path));
      const where = `${relative(REPO, page)}: ${target}`;
      if (!existsSync(file)) {
        broken.push(`${where} (no such file)`);
        continue;
      }
      if (fragment !== undefined && !(statSync(file).isFile() && anchorsOf(file).has(fragment))) {
        broken.push(`${where} (no such heading)`);
      }
    }
  }
  assert.deepEqual(broken, []);
  assert.ok(checked > 30, `${checked} links checked`);
});

test('GitHub anchors: punctuation dropped, spaces as hyphens, code marks removed', () => {
  assert.equal(anchorOf('Versions, A/B tests and canaries'), 'versions-ab-tests-and-canaries');
  assert.equal(anchorOf('gRPC (KServe v2 / Triton)'), 'grpc-kserve-v2--triton');
  assert.equal(anchorOf('Devices and `doctor`'), 'devices-and-doctor');
  assert.equal(anchorOf("The server's heap"), 'the-servers-heap');
});

test('the README and the benchmarks page stay within the lengths a newcomer reads (#35)', () => {
  const lines = (page: string): number => readFileSync(join(REPO, page), 'utf8').split('\n').length - 1;
  assert.ok(lines('README.md') <= 300, `README.md has ${lines('README.md')} lines; move an area to docs/`);
  assert.ok(
    lines('docs/benchmarks.md') <= 400,
    `docs/benchmarks.md has ${lines('docs/benchmarks.md')} lines: figures and a short paragraph each`,
  );
});
