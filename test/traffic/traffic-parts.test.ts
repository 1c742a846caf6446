import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import * as ort from 'onnxruntime-node';
import { parseCanarySettings, parseRate } from '../../src/traffic/canary-settings.js';
import { RoutingStateFile } from '../../src/traffic/routing-state.js';
import { answersAgree } from '../../src/traffic/shadow-compare.js';
import { stickyDraw, stickyPoint, versionSeed } from '../../src/traffic/sticky-hash.js';
import { VersionWindow } from '../../src/traffic/version-window.js';
import { tempDir } from '../fixtures/temp.js';

test('the sticky point of a key never changes: experiments stay reproducible across releases', () => {
  // Pinned values: changing the hash would silently move users between variants.
  assert.equal(stickyPoint('user-1'), 0.4670340372249484);
  assert.equal(stickyPoint('user-2'), 0.1986513624433428);
  assert.equal(stickyPoint(''), 0.6689221884589642);
  const points = Array.from({ length: 1000 }, (_, index) => stickyPoint(`k${index}`));
  assert.ok(points.every((point) => point >= 0 && point < 1));
  const low = points.filter((point) => point < 0.1).length;
  assert.ok(low > 60 && low < 140, `${low} of 1000 keys below 0.1`);
});

test('canary settings: defaults, "0.1%" rates, step lists, and clear refusals', () => {
  assert.deepEqual(parseCanarySettings({ version: 2 }), {
    version: '2',
    steps: [5, 20, 50, 100],
    interval: 60_000_000,
    max_error_rate: 0.01,
    min_requests: 10,
  });
  assert.deepEqual(
    parseCanarySettings({
      version: '2',
      steps: '10, 100',
      interval: '2s',
      max_error_rate: '0.1%',
      max_p99: '200ms',
      min_requests: 3,
    }),
    { version: '2', steps: [10, 100], interval: 2_000_000, max_error_rate: 0.001, max_p99: 200_000, min_requests: 3 },
  );
  assert.equal(parseRate(0.05), 0.05);
  assert.equal(parseRate('5%'), 0.05);
  for (const bad of [
    {},
    { version: '2', steps: [] },
    { version: '2', steps: [20, 10] },
    { version: '2', steps: [0, 10] },
    { version: '2', steps: [50, 101] },
    { version: '2', interval: 'soon' },
    { version: '2', max_error_rate: '-1%' },
    { version: '2', max_error_rate: 2 },
    { version: '2', max_p99: 'fast' },
    { version: '2', min_requests: 0 },
    { version: '2', extra: true },
  ]) {
    assert.throws(() => parseCanarySettings(bad), { code: 'BS_ERR_USAGE' }, JSON.stringify(bad));
  }
});

test('shadow answers agree within the relative tolerance, on names, types and shapes', () => {
  const tensor = (data: number[], dims = [1, data.length]): ort.Tensor =>
    new ort.Tensor('float32', Float32Array.from(data), dims);
  assert.ok(answersAgree({ y: tensor([1, 1000]) }, { y: tensor([1 + 1e-6, 1000.005]) }, 1e-5));
  assert.ok(!answersAgree({ y: tensor([1, 1000]) }, { y: tensor([1, 1000.1]) }, 1e-5));
  assert.ok(!answersAgree({ y: tensor([1, 2]) }, { y: tensor([1, 2], [2, 1]) }, 1e-5));
  assert.ok(!answersAgree({ y: tensor([1, 2]) }, { z: tensor([1, 2]) }, 1e-5));
  assert.ok(!answersAgree({ y: tensor([1, 2]) }, { y: tensor([1, 2]), z: tensor([1]) }, 1e-5));
  assert.ok(answersAgree({ label: 'cat', score: 0.9 }, { label: 'cat', score: 0.9 }, 0));
  assert.ok(!answersAgree({ label: 'cat' }, { label: 'dog' }, 0));
});

test('a version window counts 5xx as errors, not 4xx, and reports p99', () => {
  const window = new VersionWindow();
  assert.deepEqual(window.figures(), {
    requests: 0,
    errors: 0,
    error_rate: 0,
    p99_ms: undefined,
    labels: 0,
    correct: 0,
    accuracy: undefined,
    rewards: 0,
    mean_reward: undefined,
    reward_sd: undefined,
  });
  for (let index = 0; index < 98; index++) window.record(200, 0.002);
  window.record(404, 0.001);
  window.record(503, 0.5);
  const figures = window.figures();
  assert.equal(figures.requests, 100);
  assert.equal(figures.errors, 1);
  assert.equal(figures.error_rate, 0.01);
  assert.ok(figures.p99_ms !== undefined && Math.abs(figures.p99_ms - 2) < 0.01, `p99 ${figures.p99_ms}`);
  window.reset();
  assert.equal(window.figures().requests, 0);
});

test('the state file: missing is empty, a broken one is refused with its path, writes are whole', async (t) => {
  const dir = await tempDir(t);
  const file = new RoutingStateFile(join(dir, 'state.json'));
  assert.equal((await file.read()).size, 0);
  await file.write(
    new Map([['m', { default_version: '2', traffic: { split: { '1': 1, '2': 3 }, shadow_tolerance: 1e-5 } }]]),
  );
  const read = await file.read();
  assert.deepEqual(read.get('m'), {
    default_version: '2',
    traffic: { split: { '1': 1, '2': 3 }, shadow_tolerance: 1e-5 },
  });
  await writeFile(file.path, '{"format": 1, "models": {"m": {"traffic": {"split": {"1": -1}}}}}');
  await assert.rejects(file.read(), (error: Error & { code?: string }) => {
    assert.equal(error.code, 'BS_ERR_CONFIG_INVALID');
    assert.match(error.message, /state\.json/);
    assert.match(error.message, /split\.1/);
    return true;
  });
  await writeFile(file.path, 'not json');
  await assert.rejects(file.read(), { code: 'BS_ERR_CONFIG_INVALID' });
});

test('the per-version sticky draw is pinned: changing it would move users between variants', () => {
  assert.equal(stickyDraw(versionSeed('1'), 'user-1'), 0.9797862794948742);
  assert.equal(stickyDraw(versionSeed('2'), 'user-1'), 0.2224500348092988);
  assert.equal(stickyDraw(versionSeed('1'), 'user-2'), 0.7223612702218816);
  assert.equal(stickyDraw(versionSeed('10'), ''), 0.5801886789267883);
  // Strictly inside (0, 1), so -ln(draw) is finite and positive for every key.
  const draws = Array.from({ length: 1000 }, (_, index) => stickyDraw(versionSeed('1'), `k${index}`));
  assert.ok(draws.every((draw) => draw > 0 && draw < 1));
});
