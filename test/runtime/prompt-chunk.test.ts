import assert from 'node:assert/strict';
import { test } from 'node:test';
import { promptChunk } from '../../src/runtime/prompt-chunk.js';
import type { StepCost } from '../../src/runtime/step-cost.js';

/** A CPU-like decoder: 4 ms a step, 1 ms a token fed. */
const CPU: StepCost = {
  fixed: { value: 4, error: 0.1 },
  perToken: { value: 1, error: 0.01 },
  perPosition: { value: 0.008, error: 0.001 },
};

test('with no other batch running, a long prompt is still read in chunks a one-row step waits out', () => {
  // A request arriving meanwhile waits 4 one-row steps (4 × 5 ms): 16 tokens fit, 32 is the least.
  assert.equal(promptChunk(CPU, 0, 1, 512), 32);
});

test('running batches bound the chunk by 4 of their steps; the rows of the reading batch share it', () => {
  // Others step in 36 ms: a step of 4 × 36 ms holds (144 − 4) ÷ 1 = 140 tokens, 70 a row for two rows.
  assert.equal(promptChunk(CPU, 36, 1, 512), 140);
  assert.equal(promptChunk(CPU, 36, 2, 512), 70);
  assert.equal(promptChunk(CPU, 1000, 1, 512), 512, 'never past max_tokens_per_step');
});

test('an accelerator whose steps cost nothing by the token reads max_tokens_per_step at once', () => {
  const flat: StepCost = { ...CPU, perToken: { value: 0, error: 0 } };
  assert.equal(promptChunk(flat, 36, 1, 512), 512);
});
