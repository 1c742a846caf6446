import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { hasServingNodeFlags, SERVING_NODE_FLAGS } from '../../src/core/serving-node-flags.js';

const ROOT = new URL('../../../', import.meta.url);

test("the installed batchserve bin starts Node with the serving flags, on its shebang's env -S line", async () => {
  const { bin } = JSON.parse(await readFile(new URL('package.json', ROOT), 'utf8')) as { bin: Record<string, string> };
  const script = await readFile(new URL(bin.batchserve as string, ROOT), 'utf8');
  assert.equal(script.split('\n')[0], `#!/usr/bin/env -S node ${SERVING_NODE_FLAGS.join(' ')}`);
});

test('hasServingNodeFlags: every serving flag, to any value, in either spelling', () => {
  assert.equal(hasServingNodeFlags([]), false);
  assert.equal(hasServingNodeFlags(['--enable-source-maps']), false);
  assert.equal(hasServingNodeFlags([...SERVING_NODE_FLAGS]), true);
  // A size of the user's own counts: either spelling of the flag, any value.
  assert.equal(hasServingNodeFlags(['--initial-old-space-size=256']), true);
  assert.equal(hasServingNodeFlags(['--initial-old-space-size', '256']), true);
  assert.equal(hasServingNodeFlags(['--initial-old-space']), false, 'a prefix of the name is another flag');
  assert.equal(hasServingNodeFlags(['--max-old-space-size=64']), false);
});
