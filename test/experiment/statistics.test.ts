import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  noncentralTUpperTail,
  normalCdf,
  normalQuantile,
  tCdf,
  tQuantile,
} from '../../src/experiment/distributions.js';
import { alphaPerComparison, meanSampleSize, rateSampleSize } from '../../src/experiment/sample-size.js';
import { summarize, twoProportionZTest, welchTTest } from '../../src/experiment/fixed-horizon.js';

const near = (actual: number, expected: number, tolerance: number, what: string): void =>
  assert.ok(Math.abs(actual - expected) <= tolerance, `${what}: ${actual} is not within ${tolerance} of ${expected}`);

test('the distribution functions give the printed table values', () => {
  // Standard normal and t tables (e.g. any statistics textbook's appendix).
  near(normalQuantile(0.975), 1.959964, 1e-6, 'z 0.975');
  near(normalQuantile(0.8), 0.841621, 1e-6, 'z 0.8');
  near(normalCdf(1.96), 0.975002, 1e-6, 'Φ(1.96)');
  near(tQuantile(0.975, 10), 2.228139, 1e-6, 't 0.975, 10 df');
  near(tCdf(2.228139, 10), 0.975, 1e-6, 'T10(2.228)');
});

test('rate sample size: 10 % → 12 %, alpha 0.05 two-sided, power 0.8 needs 3,841 per group', () => {
  // Fleiss, Levin & Paik (2003) eq. 4.14 without continuity correction, as used by Evan
  // Miller's calculator, which answers 3,841 for baseline 10 %, MDE 2 % absolute.
  const plan = rateSampleSize(0.1, 0.12, { alpha: 0.05, power: 0.8, variants: 2 });
  assert.deepEqual(plan, { alphaPerComparison: 0.05, perVariant: 3841, total: 7682 });
});

test("rate sample size matches R's documented power.prop.test(p1 = .50, p2 = .75, power = .90): n = 76.65", () => {
  // R's ?power.prop.test example; its output "n = 76.65294" per group, so 77 rounded up.
  assert.equal(rateSampleSize(0.5, 0.75, { alpha: 0.05, power: 0.9, variants: 2 }).perVariant, 77);
});

test('more than two variants split alpha by Bonferroni over the comparisons with the control', () => {
  assert.equal(alphaPerComparison(0.05, 2), 0.05);
  assert.equal(alphaPerComparison(0.05, 3), 0.025);
  const two = rateSampleSize(0.1, 0.12, { alpha: 0.05, power: 0.8, variants: 2 });
  const three = rateSampleSize(0.1, 0.12, { alpha: 0.05, power: 0.8, variants: 3 });
  const twoAtHalfAlpha = rateSampleSize(0.1, 0.12, { alpha: 0.025, power: 0.8, variants: 2 });
  assert.equal(three.perVariant, twoAtHalfAlpha.perVariant);
  assert.ok(three.perVariant > two.perVariant);
  assert.equal(three.total, three.perVariant * 3);
});

test('mean sample size: effect size d = 0.5, alpha 0.05 two-sided, power 0.8 needs 64 per group', () => {
  // Cohen, "Statistical Power Analysis for the Behavioral Sciences" (2nd ed., 1988), table
  // 2.4.1: n = 64; R's power.t.test(delta = 0.5, power = 0.8) prints n = 63.77.
  assert.equal(meanSampleSize(0.5, 1, { alpha: 0.05, power: 0.8, variants: 2 }).perVariant, 64);
  assert.equal(meanSampleSize(5, 10, { alpha: 0.05, power: 0.8, variants: 2 }).perVariant, 64);
});

test("mean sample size at small n is R's power.t.test, from the noncentral t's exact power", () => {
  const options = { alpha: 0.05, power: 0.8, variants: 2 };
  // R's ?power.t.test examples: power.t.test(n = 20, delta = 1) prints power = 0.8689528, and
  // power.t.test(power = .90, delta = 1) n = 22.02110.
  const df = 38;
  near(noncentralTUpperTail(tQuantile(0.975, df), df, Math.sqrt(10)), 0.8689528, 1e-6, 'power at n = 20');
  assert.equal(meanSampleSize(1, 1, { ...options, power: 0.9 }).perVariant, 23);
  // power.t.test(delta = 1, power = .8): n = 16.71; delta = 2 SD: n = 5.09, where the
  // normal-theory size with Guenther's correction said 5.
  assert.equal(meanSampleSize(1, 1, options).perVariant, 17);
  assert.equal(meanSampleSize(2, 1, options).perVariant, 6);
});

test("Welch's t-test reproduces R's documented t.test(extra ~ group, data = sleep)", () => {
  // Student's sleep data (R's `sleep` data set); R prints t = -1.8608, df = 17.776,
  // p-value = 0.07939, 95 percent CI -3.3654832 0.2054832 for mean(group 1) − mean(group 2).
  const group1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0];
  const group2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4];
  const result = welchTTest(summarize(group2), summarize(group1));
  near(result.difference, -1.58, 1e-12, 'difference');
  near(result.statistic, -1.8608, 5e-5, 't');
  near(result.df, 17.776, 5e-4, 'df');
  near(result.pValue, 0.07939, 5e-6, 'p-value');
  near(result.confidenceInterval[0], -3.3654832, 5e-7, 'CI low');
  near(result.confidenceInterval[1], 0.2054832, 5e-7, 'CI high');
});

test('two-proportion z-test: the aspirin and cancer deaths example', () => {
  // Agresti & Franklin, "Statistics: The Art and Science of Learning from Data", ch. 10.1:
  // placebo 347/11,535, aspirin 327/14,035; pooled p̂ = 0.027, se0 = 0.002, and z = 3.5 from
  // the rounded proportions 0.030 and 0.023 (unrounded, z = 3.37).
  const result = twoProportionZTest(327, 14035, 347, 11535);
  near(result.difference, 0.03 - 0.023, 5e-4, 'difference');
  near(result.difference / result.statistic, 0.002, 5e-5, 'pooled standard error');
  near(result.statistic, 3.37, 5e-3, 'z');
  assert.ok(result.pValue < 0.001, `p-value ${result.pValue}`);
});

test('two-proportion z-test: 118/3,303 against 80/3,303 gives z = 2.742, two-sided p = 0.0061', () => {
  // Worked answer at usablestats.com/askstats/question/866 (pooled se 0.004196).
  const result = twoProportionZTest(80, 3303, 118, 3303);
  near(result.difference, 0.0115, 5e-5, 'difference');
  near(result.statistic, 2.742, 5e-4, 'z');
  near(result.pValue, 0.00611, 5e-5, 'p-value');
  // The interval is the Wald one, centred on the difference with the unpooled se.
  const unpooled = Math.sqrt(((118 / 3303) * (1 - 118 / 3303)) / 3303 + ((80 / 3303) * (1 - 80 / 3303)) / 3303);
  near(result.confidenceInterval[0], result.difference - 1.959964 * unpooled, 1e-6, 'CI low');
  near(result.confidenceInterval[1], result.difference + 1.959964 * unpooled, 1e-6, 'CI high');
});
