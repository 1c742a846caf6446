import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpus } from 'node:os';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';

const run = promisify(execFile);
const session = fileURLToPath(new URL('../../src/runtime/session.js', import.meta.url));
const demo = fileURLToPath(new URL('../../src/runtime/demo-model.js', import.meta.url));

// Opens a session with onnxruntime left to choose its threads, then lists the CPUs each of the
// process's threads may run on.
const PROGRAM = `
const { readdirSync, readFileSync } = await import('node:fs');
const { createSession } = await import(${JSON.stringify(session)});
const { DEMO_MODEL_PATH } = await import(${JSON.stringify(demo)});
await createSession(DEMO_MODEL_PATH, { runtime: { intra_op_threads: 0, inter_op_threads: 0, graph_optimization_level: 'all' } });
const allowed = readdirSync('/proc/self/task').map((task) =>
  /Cpus_allowed_list:\\s*(\\S+)/.exec(readFileSync('/proc/self/task/' + task + '/status', 'utf8'))[1]);
console.log(JSON.stringify([...new Set(allowed)]));
`;

// This machine and CI's are Linux with two CPUs; taskset is util-linux's, in every Debian.
test("a session opened in a process held to one CPU (taskset) keeps onnxruntime's threads on it", async () => {
  assert.ok(cpus().length >= 2, 'the check needs a second CPU the threads could stray to');
  const pinned = await run('taskset', ['-c', '0', process.execPath, '--input-type=module', '-e', PROGRAM]);
  assert.deepEqual(JSON.parse(pinned.stdout), ['0'], 'every thread on CPU 0');
});
