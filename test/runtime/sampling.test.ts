import { test } from 'node:test';
import assert from 'node:assert/strict';
import { adjustLogits, logprobOf, pickToken } from '../../src/runtime/sampling.js';

test('logit_bias and the presence and frequency penalties move logits as OpenAI documents', () => {
  const logits = Float32Array.of(1, 2, 3, 4);
  const counts = new Map([
    [3, 2],
    [1, 1],
  ]);
  adjustLogits(
    logits,
    { temperature: 0, topP: 1, presencePenalty: 0.5, frequencyPenalty: 0.25, logitBias: [[0, 10]] },
    counts,
  );
  // id 0: +10 bias; id 1: once, −0.5 − 0.25; id 3: twice, −0.5 − 0.5.
  assert.deepEqual([...logits], [11, 1.25, 3, 3]);
  assert.equal(pickToken(logits, { temperature: 0, topP: 1 }, Math.random), 0);
  const banned = Float32Array.of(1, 2, 3);
  adjustLogits(banned, { temperature: 0, topP: 1, logitBias: [[2, -100]] }, new Map());
  assert.equal(pickToken(banned, { temperature: 0, topP: 1 }, Math.random), 1);
});

test('a token’s log probability and the most likely ones are those of softmax over the logits', () => {
  const logits = Float32Array.of(0, Math.log(2), Math.log(4), Math.log(1));
  // Probabilities 1/8, 2/8, 4/8, 1/8.
  const { logprob, top } = logprobOf(logits, 1, 3);
  assert.ok(Math.abs(logprob - Math.log(2 / 8)) < 1e-6);
  assert.deepEqual(
    top.map(([id]) => id),
    [2, 1, 0],
    'best first; of equals, the lower id',
  );
  assert.ok(Math.abs((top[0]?.[1] ?? 0) - Math.log(4 / 8)) < 1e-6);
  assert.deepEqual(logprobOf(logits, 2, 0).top, []);
});
