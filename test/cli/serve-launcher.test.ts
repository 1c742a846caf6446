import { test } from 'node:test';
import assert from 'node:assert/strict';
import { needsLaunch } from '../../src/cli/serve-launcher.js';
import { hasServingNodeFlags, SERVING_NODE_FLAGS } from '../../src/core/serving-node-flags.js';

test('serve launches a Node with the serving flags only when it has none of its own and is not a launched server', () => {
  assert.equal(needsLaunch([], {}), true);
  assert.equal(needsLaunch(['--enable-source-maps'], {}), true);
  assert.equal(needsLaunch([...SERVING_NODE_FLAGS], {}), false);
  // A size of the user's own wins: either spelling of the flag, any value.
  assert.equal(needsLaunch(['--initial-old-space-size=256'], {}), false);
  assert.equal(needsLaunch(['--initial-old-space-size', '256'], {}), false);
  assert.equal(needsLaunch(['--initial-old-space'], {}), true, 'a prefix of the name is another flag');
  // The server a launcher started never launches again, whatever its flags.
  assert.equal(needsLaunch([], { BATCHSERVE_LAUNCHED_BY: '4242' }), false);
  assert.equal(hasServingNodeFlags(['--max-old-space-size=64']), false);
});
