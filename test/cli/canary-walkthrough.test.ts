import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { request } from 'undici';
import { affineModel, writeModel } from '../fixtures/onnx-models.js';
import { tempDir } from '../fixtures/temp.js';
import { BIN, REPO, runChild, serveChild, type Served } from './container-child.js';

const HEADING = '**Walkthrough: ship v2 as a canary, watch it, roll back.**';

/** docs/versions.md's canary walkthrough (the README points there): its shell block, one command a line (continuations joined, comments and shown output cut). */
async function walkthroughCommands(): Promise<string[]> {
  const readme = await readFile(join(REPO, 'docs', 'versions.md'), 'utf8');
  const after = readme.slice(readme.indexOf(HEADING));
  const block = /```sh\n([\s\S]*?)```/.exec(after)?.[1];
  assert.ok(block, 'the walkthrough has a sh block');
  return block
    .replace(/\\\n\s*/g, '')
    .split('\n')
    .map((line) => line.replace(/\s+#.*$/, '').trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
}

/** Shell words: split on spaces, double quotes kept together. */
function words(line: string): string[] {
  return [...line.matchAll(/"([^"]*)"|(\S+)/g)].map((match) => match[1] ?? match[2] ?? '');
}

test('the canary walkthrough of docs/versions.md, run as written: v2 loads without traffic, the canary starts, rolls back', async (t) => {
  const cwd = await tempDir(t);
  await writeModel(cwd, 'cls-v1.onnx', affineModel([4], 'batch', 1));
  await writeModel(cwd, 'cls-v2.onnx', affineModel([4], 'batch', 2));
  let served: Served | undefined;
  const outputs: string[] = [];
  const infer = async (): Promise<string> => {
    const answer = await request(`${served?.urls.inference}/v2/models/cls/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }] }),
    });
    await answer.body.text();
    return String(answer.headers['x-model-version']);
  };
  for (const line of await walkthroughCommands()) {
    const key = async (): Promise<string> => (await readFile(join(cwd, 'batchserve.key'), 'utf8')).trim();
    const argv = words(line.replace(/\$\(cat batchserve\.key\)/g, served ? await key() : ''));
    const [program, ...args] = argv;
    if (program === 'batchserve' && args[0] === 'serve') {
      assert.equal(args.at(-1), '&', 'serve runs in the background');
      served = await serveChild(t, args.slice(1, -1), { cwd });
      assert.equal(await infer(), '1');
    } else if (program === 'batchserve') {
      const target = args[0] === 'canary' ? ['--management-url', served?.urls.management ?? ''] : [];
      const run = await runChild(process.execPath, [BIN, ...args, ...target], { cwd });
      assert.equal(run.code, 0, `${line}\n${run.stderr}`);
      outputs.push(run.stdout);
    } else {
      assert.equal(program, 'curl');
      const header = args[args.indexOf('-H') + 1] ?? '';
      const url = (args.at(-1) ?? '').replace('127.0.0.1:8081', served?.urls.management ?? '');
      const answer = await request(url, {
        method: args[args.indexOf('-X') + 1] as 'POST',
        headers: { [header.slice(0, header.indexOf(':'))]: header.slice(header.indexOf(':') + 1).trim() },
      });
      const body = await answer.body.text();
      assert.equal(answer.statusCode, 200, `${line}\n${body}`);
      assert.equal(await infer(), '1', 'the version just loaded takes no traffic by itself');
    }
  }
  const [, , started, status, rolledBack] = outputs;
  assert.match(started ?? '', /step 1 of 4: version 2 gets 5%/);
  assert.match(status ?? '', /step 1 of 4: version 2 gets 5%, version 1 the rest/);
  assert.match(rolledBack ?? '', /rolled back: version 1 takes all traffic/);
  assert.equal(await infer(), '1');
});
