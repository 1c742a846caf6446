import { test } from 'node:test';
import assert from 'node:assert/strict';
import { StepCostModel } from '../../src/runtime/step-cost.js';

test('the step cost is learnt once tokens and positions vary apart, and kept while steady decoding says nothing new', () => {
  const model = new StepCostModel();
  const cost = (tokens: number, positions: number): number => 4 + 0.5 * tokens + 0.008 * positions;
  // Steady decoding: 16 rows a step, the cache one position wider each step: tokens never vary.
  for (let step = 0; step < 64; step++) model.record(16, 16 * (40 + step), cost(16, 16 * (40 + step)));
  assert.equal(model.fit(), undefined, 'the fixed cost and the per-token cost cannot be told apart');

  // Rows join and leave, prompts are read: now they can.
  for (let step = 0; step < 64; step++) {
    const rows = 4 + (step % 13);
    const tokens = rows * (step % 5 === 0 ? 8 : 1);
    const positions = rows * (30 + ((step * 7) % 50));
    model.record(tokens, positions, cost(tokens, positions) * (1 + 0.01 * Math.sin(step)));
  }
  const fit = model.fit();
  assert.ok(fit, 'trusted');
  assert.ok(Math.abs(fit.fixed.value - 4) < 0.3, `fixed ${fit.fixed.value}`);
  assert.ok(Math.abs(fit.perToken.value - 0.5) < 0.03, `per token ${fit.perToken.value}`);
  assert.ok(Math.abs(fit.perPosition.value - 0.008) < 0.001, `per position ${fit.perPosition.value}`);
  for (const term of [fit.fixed, fit.perToken, fit.perPosition]) {
    assert.ok(term.error > 0 && term.error < 0.1 * term.value, `a 1 % noise leaves ${JSON.stringify(term)}`);
  }

  // Steady decoding again, for a whole window: the last trusted fit stands.
  for (let step = 0; step < 300; step++) model.record(16, 16 * (40 + (step % 100)), cost(16, 16 * (40 + (step % 100))));
  assert.deepEqual(model.fit(), fit);
});

test('on a device where only the fixed cost and the tokens count, positions cost nothing, within a noisy wake-up', () => {
  const model = new StepCostModel();
  for (let step = 0; step < 256; step++) {
    const rows = 1 + (step % 16);
    // The simulated device: 8 ms + 0.1 ms a token, each step off by up to a millisecond.
    model.record(rows, rows * (10 + ((step * 11) % 200)), 8 + 0.1 * rows + Math.cos(step * 1.7));
  }
  const fit = model.fit();
  assert.ok(fit && Math.abs(fit.fixed.value - 8) < fit.fixed.error + 0.2, JSON.stringify(fit));
  // A short row beside a long one pads 1,000 positions: even the upper bound is far below a step.
  assert.ok((fit.perPosition.value + fit.perPosition.error) * 1000 < fit.fixed.value - fit.fixed.error);
});
