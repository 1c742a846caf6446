// `npm test`'s last step: every test in dist/test under V8 coverage, then c8's report and its
// thresholds (.c8rc.json). c8 is not used as the runner because handlers written in
// TypeScript load through tsx as data: URLs, and c8 12 throws on a data: URL in V8's
// source-map cache; those entries (never our sources) are dropped before the report.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';

const root = new URL('../', import.meta.url).pathname;
const raw = join(root, 'coverage/tmp');
rmSync(join(root, 'coverage'), { recursive: true, force: true });
mkdirSync(raw, { recursive: true });

// Two files at a time even on two cores: many wait on child processes, sockets and the
// simulated accelerator's wall-clock passes, so a second file fills the first one's waits
// (sequential 5 min 18 s, two at a time about 3 min 50 s, here).
const concurrency = Math.max(2, availableParallelism());
const tests = spawnSync(process.execPath, ['--test', `--test-concurrency=${concurrency}`, 'dist/test/'], {
  cwd: root,
  stdio: 'inherit',
  env: { ...process.env, NODE_V8_COVERAGE: raw },
});

for (const file of readdirSync(raw)) {
  const path = join(raw, file);
  const coverage = JSON.parse(readFileSync(path, 'utf8'));
  const maps = coverage['source-map-cache'];
  if (!maps) continue;
  for (const url of Object.keys(maps)) if (!url.startsWith('file:')) delete maps[url];
  writeFileSync(path, JSON.stringify(coverage));
}

const c8 = join(root, 'node_modules/c8/bin/c8.js');
const report = spawnSync(process.execPath, [c8, 'report'], { cwd: root, stdio: 'inherit' });
process.exitCode = tests.status !== 0 ? (tests.status ?? 1) : (report.status ?? 1);
