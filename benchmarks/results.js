// What every benchmark script shares: its flags, the machine it ran on, and the JSON it writes
// beside its printed figures (benchmarks/results/<name>.json, committed). docs/benchmarks.md
// is regenerated from those files by `npm run docs:bench`, never edited by hand.
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { cpus, loadavg, release } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

export const ROOT = fileURLToPath(new URL('../', import.meta.url));
export const RESULTS_DIR = join(ROOT, 'benchmarks/results');

/**
 * --quick: the script's shortest settings, to check it end to end (figures are rougher).
 * --check: exit 1 when a target is MISSED. --json <file>: write there instead of results/.
 */
export function benchFlags(name, args = process.argv.slice(2)) {
  const { values } = parseArgs({
    args,
    options: {
      quick: { type: 'boolean', default: false },
      check: { type: 'boolean', default: false },
      json: { type: 'string' },
    },
  });
  return { quick: values.quick, check: values.check, json: values.json ?? join(RESULTS_DIR, `${name}.json`) };
}

export function packageVersion(name) {
  return JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')).version;
}

/** The machine and versions a figure belongs to; the load average shows a busy machine. */
export function environment(extraVersions = []) {
  const cpu = cpus();
  return {
    cpu: cpu[0]?.model.trim() ?? 'unknown CPU',
    cpus: cpu.length,
    platform: process.platform,
    release: release(),
    loadAverage: loadavg().map((load) => Number(load.toFixed(2))),
    node: process.version,
    onnxruntime: packageVersion('onnxruntime-node'),
    ...Object.fromEntries(extraVersions.map((name) => [name, packageVersion(name)])),
  };
}

/** The result as committed: name, date, source and environment first, then the figures. */
export function resultRecord(name, { quick }, figures, extraVersions = []) {
  return {
    name,
    date: new Date().toISOString(),
    source: 'run',
    quick,
    environment: environment(extraVersions),
    ...figures,
  };
}

/** Written as Prettier writes it, so `npm run lint` passes on a fresh result. */
export async function writeResult(file, record) {
  const prettier = await import('prettier');
  const options = { ...(await prettier.resolveConfig(file)), filepath: file };
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, await prettier.format(JSON.stringify(record), options));
  console.log(`\nwrote ${file}`);
}

/** With --check, a MISSED target fails the run (after the figures and the JSON are out). */
export function exitOnMissed({ check }, verdicts) {
  const missed = verdicts.filter((verdict) => !verdict.met);
  if (check && missed.length > 0) {
    console.error(`MISSED: ${missed.map((verdict) => verdict.label).join('; ')}`);
    process.exitCode = 1;
  }
}
