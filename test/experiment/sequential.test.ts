import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SequentialTest, mixtureLikelihoodRatio, mixtureVariance } from '../../src/experiment/sequential.js';
import { seededNormal } from './random.js';

const ALPHA = 0.05;
const EXPERIMENTS = 1000;
const LOOKS = 200;
const BATCH = 10;

/**
 * Runs EXPERIMENTS simulated A/B tests of unit-variance normal observations, each peeked
 * after every BATCH observations per arm for up to LOOKS looks, and counts how often each
 * rule ever declares a difference.
 */
function simulate(trueEffect: number, seed: number): { sequential: number; naiveZ: number } {
  const normal = seededNormal(seed);
  const tau2 = mixtureVariance(0.1);
  let sequentialRejections = 0;
  let naiveRejections = 0;
  for (let experiment = 0; experiment < EXPERIMENTS; experiment++) {
    const sequential = new SequentialTest(tau2);
    let sumA = 0;
    let sumB = 0;
    let rejectedSequential = false;
    let rejectedNaive = false;
    for (let look = 1; look <= LOOKS && !(rejectedSequential && rejectedNaive); look++) {
      for (let i = 0; i < BATCH; i++) {
        sumA += normal();
        sumB += normal() + trueEffect;
      }
      const n = look * BATCH;
      const difference = (sumB - sumA) / n;
      const variance = 2 / n;
      if (sequential.look(difference, variance).pValue <= ALPHA) rejectedSequential = true;
      // The fixed-horizon z-test read at every look, which peeking breaks.
      if (Math.abs(difference / Math.sqrt(variance)) >= 1.959964) rejectedNaive = true;
    }
    if (rejectedSequential) sequentialRejections++;
    if (rejectedNaive) naiveRejections++;
  }
  return { sequential: sequentialRejections / EXPERIMENTS, naiveZ: naiveRejections / EXPERIMENTS };
}

test('under no difference, peeking after every batch keeps the false positive rate ≤ alpha', () => {
  const rates = simulate(0, 20240601);
  assert.ok(rates.sequential <= ALPHA, `sequential false positive rate ${rates.sequential}`);
  // The same peeking with the fixed-horizon z-test is far above alpha: the simulation bites.
  assert.ok(rates.naiveZ > 3 * ALPHA, `peeked z-test false positive rate ${rates.naiveZ}`);
});

test('a real difference is found', () => {
  const rates = simulate(0.2, 7);
  assert.ok(rates.sequential >= 0.9, `sequential power ${rates.sequential}`);
});

test('the always-valid p-value never rises, and Λ is 1 before any evidence', () => {
  assert.equal(mixtureLikelihoodRatio(0, 1e12, 1), Math.sqrt(1e12 / (1e12 + 1)));
  const sequential = new SequentialTest(0.01);
  const first = sequential.look(0.3, 0.01).pValue;
  const second = sequential.look(0, 0.005).pValue;
  assert.ok(first < 1);
  assert.equal(second, first);
  assert.equal(sequential.state.looks, 2);
  assert.throws(() => new SequentialTest(0), RangeError);
});
