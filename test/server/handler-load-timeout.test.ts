import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { pino } from 'pino';
import { packArchive } from '../../src/archive/pack.js';
import { affine, affineRequest, call, packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { within } from './handler-gate.js';

const TIMEOUT = 'handler_load_timeout: 500ms\n';
const MAIN = 'runtime:\n  thread: main\n';

/**
 * A handler that packs cleanly and, once `marker` exists, runs `atImport` at its top level: what
 * a handler stuck on a resource only the serving machine has looks like.
 */
const handlerThatTurns = (marker: string, atImport: string): string =>
  `import { existsSync } from 'node:fs';
if (existsSync(${JSON.stringify(marker)})) { ${atImport} }
export function postprocess(outputs) { return outputs; }
`;

test('handlers that loop or exit at import fail their own load within handler_load_timeout; the good model serves', async (t) => {
  const dir = await tempDir(t, 'batchserve-handler-timeout-');
  const marker = join(dir, 'turn-bad');
  const pack = (name: string, config: string, atImport: string): Promise<string> =>
    packAffine(join(dir, name), { name, config, handlerSource: handlerThatTurns(marker, atImport) });
  const bad = {
    'loop-worker': await pack('loop-worker', `max_batch_size: 8\n${TIMEOUT}`, 'for (;;) {}'),
    'loop-main': await pack('loop-main', `max_batch_size: 8\n${TIMEOUT}${MAIN}`, 'for (;;) {}'),
    'exit-main': await pack('exit-main', `max_batch_size: 8\n${TIMEOUT}${MAIN}`, 'process.exit(0);'),
    'exit-worker': await pack('exit-worker', `max_batch_size: 8\n${TIMEOUT}`, 'process.exit(0);'),
  };
  const good = await packAffine(join(dir, 'good'));
  const stepsFile = join(dir, 'steps.mjs');
  await writeFile(
    stepsFile,
    handlerThatTurns(marker, 'for (;;) {}').replace(
      'export function postprocess(outputs) { return outputs; }',
      'export function copy(requests) { return requests.map((request) => ({ y: request.x })); }',
    ),
  );
  await writeFile(
    join(dir, 'flow.yaml'),
    `${TIMEOUT}inputs: [{ name: x, datatype: FP32, shape: [-1, 4] }]
outputs: [{ name: y, datatype: FP32, shape: [-1, 4] }]
pipeline:
  steps:
    - { name: copy, function: steps.mjs#copy, inputs: { x: x }, outputs: { y: y } }
`,
  );
  const flow = await packArchive({
    modelName: 'loop-step',
    configFile: join(dir, 'flow.yaml'),
    extraFiles: [stepsFile],
    exportPath: join(dir, 'flow'),
  });
  Object.assign(bad, { 'loop-step': flow.path });
  await writeFile(marker, '');

  const lines: { level: number; msg: string; archive?: string; code?: string; err?: string }[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  const models = [...Object.entries(bad).map(([name, path]) => `${name}=${path}`), `affine=${good}`];
  const started = performance.now();
  const server = await within(startTestServer(t, { models, work_dir: dir }, logger), 30_000, 'serve to start');
  const seconds = (performance.now() - started) / 1000;
  assert.ok(seconds < 30, `started after ${seconds.toFixed(1)} s`);

  const failures = new Map(server.startupFailures.map((failure) => [failure.spec.split('=')[0], failure.message]));
  assert.deepEqual([...failures.keys()].sort(), Object.keys(bad).sort());
  assert.match(
    failures.get('loop-worker') ?? '',
    /did not finish importing within 500 ms .*\[BS_ERR_HANDLER_LOAD_TIMEOUT\]$/,
  );
  assert.match(
    failures.get('loop-main') ?? '',
    /did not finish importing within 500 ms .*\[BS_ERR_HANDLER_LOAD_TIMEOUT\]$/,
  );
  assert.match(
    failures.get('exit-main') ?? '',
    /called process\.exit\(0\) while being imported \[BS_ERR_HANDLER_INVALID\]$/,
  );
  assert.match(
    failures.get('loop-step') ?? '',
    /step module .*steps\.mjs did not finish importing within 500 ms .*\[BS_ERR_HANDLER_LOAD_TIMEOUT\]$/,
  );
  assert.match(
    failures.get('exit-worker') ?? '',
    /called process\.exit\(0\) while being imported \[BS_ERR_HANDLER_INVALID\]$/,
  );
  for (const path of Object.values(bad)) {
    assert.equal(
      lines.filter((line) => line.level >= 50 && line.archive === path).length,
      1,
      `one error line for ${path}`,
    );
  }

  const answer = await call(`${server.urls.inference}/v2/models/affine/infer`, { body: affineRequest([[1, 2, 3, 4]]) });
  assert.equal(answer.status, 200);
  assert.deepEqual(answer.body.outputs[0].data, affine([[1, 2, 3, 4]]));
  for (const name of Object.keys(bad)) {
    assert.notEqual((await call(`${server.urls.inference}/v2/models/${name}/ready`)).status, 200, name);
  }
});
