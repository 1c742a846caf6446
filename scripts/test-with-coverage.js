// `npm test`'s last step: every test in dist/test under V8 coverage, then c8's report and its
// thresholds (.c8rc.json). c8 is not used as the runner because handlers written in
// TypeScript load through tsx as data: URLs, and c8 12 throws on a data: URL in V8's
// source-map cache; those entries (never our sources) are dropped before the report.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join, relative } from 'node:path';
import { isMainThread, Worker, workerData } from 'node:worker_threads';

const root = new URL('../', import.meta.url).pathname;
const raw = join(root, 'coverage/tmp');
/** What the report counts (.c8rc.json's include); V8 records every script a process ran. */
const SOURCES = `file://${join(root, 'dist/src/')}`;

if (isMainThread) await main();
else keepSourcesOnly(workerData.files);

async function main() {
  rmSync(join(root, 'coverage'), { recursive: true, force: true });
  mkdirSync(raw, { recursive: true });

  // Only the *.test.js files: given a folder, node 20's runner also runs every helper module
  // under a test/ folder as a file of its own (27 here, about 15 CPU s for no test).
  const files = readdirSync(join(root, 'dist/test'), { recursive: true })
    .filter((name) => name.endsWith('.test.js'))
    .map((name) => relative(root, join(root, 'dist/test', name)))
    .sort();
  // Two files at a time even on two cores: many wait on child processes, sockets and the
  // simulated accelerator's wall-clock passes, so a second file fills the first one's waits
  // (sequential 5 min 18 s, two at a time about 3 min 50 s, here).
  const concurrency = Math.max(2, availableParallelism());
  const tests = spawnSync(process.execPath, ['--test', `--test-concurrency=${concurrency}`, ...files], {
    cwd: root,
    stdio: 'inherit',
    env: { ...process.env, NODE_V8_COVERAGE: raw },
  });

  // Each process's file holds node's internals and node_modules too, nine tenths of its bytes:
  // cut to our sources before c8 parses them all (its report went from 17 s to 4 s), in one
  // worker a core.
  const outputs = readdirSync(raw).map((file) => join(raw, file));
  const workers = Math.min(availableParallelism(), outputs.length);
  await Promise.all(
    Array.from({ length: workers }, (_, index) => {
      const share = outputs.filter((_, at) => at % workers === index);
      const worker = new Worker(new URL(import.meta.url), { workerData: { files: share } });
      return new Promise((done, fail) => worker.once('exit', done).once('error', fail));
    }),
  );

  const c8 = join(root, 'node_modules/c8/bin/c8.js');
  const report = spawnSync(process.execPath, [c8, 'report'], { cwd: root, stdio: 'inherit' });
  process.exitCode = tests.status !== 0 ? (tests.status ?? 1) : (report.status ?? 1);
}

/** Drops every script but dist/src's, and source maps of anything else (data: URLs among them). */
function keepSourcesOnly(files) {
  for (const path of files) {
    const coverage = JSON.parse(readFileSync(path, 'utf8'));
    coverage.result = coverage.result.filter((script) => script.url.startsWith(SOURCES));
    const maps = coverage['source-map-cache'];
    if (maps) for (const url of Object.keys(maps)) if (!url.startsWith(SOURCES)) delete maps[url];
    if (coverage.result.length === 0) rmSync(path);
    else writeFileSync(path, JSON.stringify(coverage));
  }
}
