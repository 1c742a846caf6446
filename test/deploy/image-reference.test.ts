import assert from 'node:assert/strict';
import { test } from 'node:test';
import { cudaImage, cudaTag, parseImageReference, releaseImage } from '../../src/deploy/image-reference.js';
import { pendingRowsQuery } from '../../src/deploy/pending-rows.js';

const usage = { code: 'BS_ERR_USAGE' };

test('image references: registry ports, nested paths, tags and digests', () => {
  assert.deepEqual(parseImageReference('redis:7', '--image'), { repository: 'redis', tag: '7', digest: undefined });
  assert.deepEqual(parseImageReference('localhost:5000/team/resnet-batchserve:1.0_rc1', '--image'), {
    repository: 'localhost:5000/team/resnet-batchserve',
    tag: '1.0_rc1',
    digest: undefined,
  });
  const digest = `sha256:${'0'.repeat(64)}`;
  assert.deepEqual(parseImageReference(`ghcr.io/batchserve/batchserve@${digest}`, '--image'), {
    repository: 'ghcr.io/batchserve/batchserve',
    tag: undefined,
    digest,
  });
  for (const bad of ['', 'Upper/case:1', 'a b:1', 'repo:', 'repo:-tag', 'https://ghcr.io/x:1', 'x@sha256:short']) {
    assert.throws(() => parseImageReference(bad, '--image'), usage, bad);
  }
});

test('--gpu picks the -cuda tag of the same image, and refuses what has no tag to vary', () => {
  assert.equal(releaseImage('0.1.0'), 'ghcr.io/batchserve/batchserve:0.1.0');
  assert.equal(cudaImage('ghcr.io/batchserve/batchserve:0.1.0', '--image'), 'ghcr.io/batchserve/batchserve:0.1.0-cuda');
  assert.equal(cudaImage('localhost:5000/resnet:2-cuda', '--image'), 'localhost:5000/resnet:2-cuda');
  assert.equal(cudaTag('ghcr.io/batchserve/batchserve:0.1.0', '--image'), '0.1.0-cuda');
  assert.throws(() => cudaImage('localhost:5000/resnet', '--image'), usage);
  assert.throws(() => cudaImage(`resnet:1@sha256:${'f'.repeat(64)}`, '--image'), usage);
});

test('the autoscaling query sums the pending rows of one model, in one namespace when given', () => {
  assert.equal(pendingRowsQuery('resnet', undefined), 'sum(batchserve_pending_rows{model="resnet"})');
  assert.equal(pendingRowsQuery('resnet', 'ml'), 'sum(batchserve_pending_rows{namespace="ml",model="resnet"})');
});
