import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ServerMetrics } from '../../src/metrics/server-metrics.js';
import { bucketsOf, parseExposition, samplesOf } from './prometheus-text.js';

function recordTraffic(metrics: ServerMetrics): void {
  metrics.modelLoaded('resnet', '1', 2.5, 'cpu');
  metrics.modelLoaded('bert', '3', 7, 'cuda:0');
  metrics.setBusyInstances('resnet', '1', 1, 2);
  metrics.setQueueDepth('resnet', '1', 12);
  metrics.setBusyInstances('bert', '3', 0, 1);
  metrics.setQueueDepth('bert', '3', 0);
  metrics.batchExecuted('resnet', '1', 3, 0.004, 'resnet:1:0');
  for (let i = 0; i < 3; i++) {
    metrics.requestTimings('resnet', '1', 0.001, 0.004);
    metrics.requestFinished('resnet', '1', 200, 0.006, 'rest');
  }
  metrics.requestFinished('resnet', '1', 503, 0.0001, 'rest');
  metrics.requestFinished('bert', '3', 400, 0.0002, 'rest');
}

async function scrape(metrics: ServerMetrics) {
  return parseExposition(await metrics.text());
}

test('the exposition parses strictly, histograms included, and declares each batchserve metric', async () => {
  const metrics = new ServerMetrics();
  recordTraffic(metrics);
  const families = await scrape(metrics);

  const types = Object.fromEntries(
    [...families.values()].filter((f) => f.name.startsWith('batchserve_')).map((f) => [f.name, f.type]),
  );
  assert.deepEqual(types, {
    batchserve_requests_total: 'counter',
    batchserve_requests_refused_total: 'counter',
    batchserve_request_duration_seconds: 'histogram',
    batchserve_queue_duration_seconds: 'histogram',
    batchserve_compute_duration_seconds: 'histogram',
    batchserve_batch_compute_duration_seconds: 'histogram',
    batchserve_batch_size: 'histogram',
    batchserve_queue_rows: 'gauge',
    batchserve_pending_rows: 'gauge',
    batchserve_instance_busy_ratio: 'gauge',
    batchserve_instance_busy_seconds_total: 'counter',
    batchserve_instances_busy: 'gauge',
    batchserve_instances: 'gauge',
    batchserve_model_load_seconds: 'gauge',
    batchserve_pipeline_step_duration_seconds: 'histogram',
    batchserve_instance_restarts_total: 'counter',
    batchserve_canary_weight: 'gauge',
    batchserve_shadow_requests_total: 'counter',
    batchserve_shadow_duration_seconds: 'histogram',
    batchserve_shadow_agreement_ratio: 'gauge',
    batchserve_prediction_log_dropped_total: 'counter',
    batchserve_tokens_total: 'counter',
    batchserve_time_to_first_token_seconds: 'histogram',
    batchserve_inter_token_latency_seconds: 'histogram',
    batchserve_active_sequences: 'gauge',
    batchserve_kv_cache_bytes: 'gauge',
    batchserve_prefix_cache_hits_total: 'counter',
    batchserve_prefix_cache_tokens_total: 'counter',
    batchserve_feedback_total: 'counter',
    batchserve_batching_fixed_cost_seconds: 'gauge',
    batchserve_batching_row_cost_seconds: 'gauge',
    batchserve_batching_fit_r2: 'gauge',
    batchserve_batching_fit_trusted: 'gauge',
    batchserve_batching_wait_seconds: 'gauge',
    batchserve_cache_hits_total: 'counter',
    batchserve_cache_misses_total: 'counter',
    batchserve_cache_evictions_total: 'counter',
    batchserve_cache_bytes: 'gauge',
  });
  for (const family of families.values()) {
    if (family.name.startsWith('batchserve_')) assert.match(family.help ?? '', /^\S.*, in [a-z]+\.$/, family.name);
  }
  assert.ok(families.has('process_cpu_user_seconds_total'), 'process metrics are collected by default');
  assert.match(metrics.contentType, /^text\/plain; version=0\.0\.4/);
});

test('process metrics can be left out', async () => {
  const families = await scrape(new ServerMetrics({ collectProcessMetrics: false }));
  assert.deepEqual(
    [...families.keys()].filter((name) => !name.startsWith('batchserve_')),
    [],
  );
});

test('known durations land in the expected cumulative buckets, bounds inclusive', async () => {
  const metrics = new ServerMetrics({ collectProcessMetrics: false });
  for (const seconds of [0.00003, 0.00005, 0.0003, 0.003, 3, 20])
    metrics.requestFinished('m', '1', 200, seconds, 'rest');
  const families = await scrape(metrics);
  const labels = { model: 'm', version: '1' };

  assert.deepEqual(bucketsOf(families, 'batchserve_request_duration_seconds', labels), {
    '0.00005': 2,
    '0.0001': 2,
    '0.0002': 2,
    '0.0005': 3,
    '0.001': 3,
    '0.002': 3,
    '0.005': 4,
    '0.01': 4,
    '0.02': 4,
    '0.05': 4,
    '0.1': 4,
    '0.2': 4,
    '0.5': 4,
    '1': 4,
    '2': 4,
    '5': 5,
    '10': 5,
    '+Inf': 6,
  });
  const [count] = samplesOf(families, 'batchserve_request_duration_seconds_count', labels);
  const [sum] = samplesOf(families, 'batchserve_request_duration_seconds_sum', labels);
  assert.equal(count?.value, 6);
  assert.ok(Math.abs((sum?.value ?? 0) - 23.00338) < 1e-9);
  assert.deepEqual(
    samplesOf(families, 'batchserve_requests_total', labels).map((s) => [s.labels.status, s.value]),
    [['200', 6]],
  );
});

test('batch sizes land in power-of-two buckets', async () => {
  const metrics = new ServerMetrics({ collectProcessMetrics: false });
  for (const size of [1, 3, 4, 4, 1024, 2000]) metrics.batchExecuted('m', '1', size, 0.01, 'm:1:0');
  const families = await scrape(metrics);
  assert.deepEqual(bucketsOf(families, 'batchserve_batch_size', { model: 'm', version: '1' }), {
    '1': 1,
    '2': 1,
    '4': 4,
    '8': 4,
    '16': 4,
    '32': 4,
    '64': 4,
    '128': 4,
    '256': 4,
    '512': 4,
    '1024': 5,
    '+Inf': 6,
  });
  const [batchCompute] = samplesOf(families, 'batchserve_batch_compute_duration_seconds_count', { model: 'm' });
  assert.equal(batchCompute?.value, 6);
});

test('every (model, version) has its own series; statuses split the request counter', async () => {
  const metrics = new ServerMetrics({ collectProcessMetrics: false });
  recordTraffic(metrics);
  metrics.requestFinished('resnet', '2', 200, 0.01, 'rest');
  const families = await scrape(metrics);

  const requests = samplesOf(families, 'batchserve_requests_total').map((s) => [
    s.labels.model,
    s.labels.version,
    s.labels.status,
    s.value,
  ]);
  assert.deepEqual(requests.sort(), [
    ['bert', '3', '400', 1],
    ['resnet', '1', '200', 3],
    ['resnet', '1', '503', 1],
    ['resnet', '2', '200', 1],
  ]);
  const observations = (name: string) =>
    samplesOf(families, `${name}_count`, { model: 'resnet', version: '1' }).map((s) => s.value);
  assert.deepEqual(observations('batchserve_request_duration_seconds'), [4]);
  assert.deepEqual(observations('batchserve_queue_duration_seconds'), [3]);
  assert.deepEqual(observations('batchserve_compute_duration_seconds'), [3]);
  assert.deepEqual(observations('batchserve_batch_compute_duration_seconds'), [1]);
  assert.deepEqual(observations('batchserve_batch_size'), [1]);
  const gauge = (name: string, model: string, version: string) =>
    samplesOf(families, name, { model, version }).map((s) => s.value);
  assert.deepEqual(gauge('batchserve_queue_rows', 'resnet', '1'), [12]);
  assert.deepEqual(gauge('batchserve_instances_busy', 'resnet', '1'), [1]);
  assert.deepEqual(gauge('batchserve_instances', 'resnet', '1'), [2]);
  assert.deepEqual(gauge('batchserve_queue_rows', 'bert', '3'), [0]);
  assert.deepEqual(
    samplesOf(families, 'batchserve_model_load_seconds').map((s) => [s.labels.model, s.labels.device, s.value]),
    [
      ['resnet', 'cpu', 2.5],
      ['bert', 'cuda:0', 7],
    ],
  );
});

test('modelUnloaded removes that version’s gauge series and keeps its counters and histograms', async () => {
  const metrics = new ServerMetrics({ collectProcessMetrics: false });
  recordTraffic(metrics);
  metrics.modelUnloaded('resnet', '1');
  metrics.modelUnloaded('never-loaded', '1');
  let families = await scrape(metrics);

  for (const name of [
    'batchserve_queue_rows',
    'batchserve_instances_busy',
    'batchserve_instances',
    'batchserve_model_load_seconds',
  ]) {
    assert.deepEqual(samplesOf(families, name, { model: 'resnet' }), [], name);
    assert.equal(samplesOf(families, name, { model: 'bert', version: '3' }).length, 1, name);
  }
  assert.equal(samplesOf(families, 'batchserve_requests_total', { model: 'resnet' }).length, 2);
  assert.equal(samplesOf(families, 'batchserve_request_duration_seconds_count', { model: 'resnet' })[0]?.value, 4);

  metrics.modelLoaded('resnet', '1', 1.5, 'cpu');
  metrics.setQueueDepth('resnet', '1', 4);
  metrics.requestFinished('resnet', '1', 200, 0.01, 'rest');
  families = await scrape(metrics);
  assert.deepEqual(
    samplesOf(families, 'batchserve_queue_rows', { model: 'resnet' }).map((s) => s.value),
    [4],
  );
  assert.equal(samplesOf(families, 'batchserve_request_duration_seconds_count', { model: 'resnet' })[0]?.value, 5);
});

test('reloading a version on another device replaces its load series', async () => {
  const metrics = new ServerMetrics({ collectProcessMetrics: false });
  metrics.modelLoaded('m', '1', 3, 'cpu');
  metrics.modelLoaded('m', '1', 9, 'cuda:1');
  const families = await scrape(metrics);
  assert.deepEqual(
    samplesOf(families, 'batchserve_model_load_seconds').map((s) => [s.labels.device, s.value]),
    [['cuda:1', 9]],
  );
});

test('two servers in one process keep separate registries', async () => {
  const first = new ServerMetrics();
  const second = new ServerMetrics();
  assert.notEqual(first.registry, second.registry);
  first.requestFinished('only-first', '1', 200, 0.01, 'rest');
  second.setQueueDepth('only-second', '1', 5);

  const [a, b] = await Promise.all([scrape(first), scrape(second)]);
  assert.equal(samplesOf(a, 'batchserve_requests_total', { model: 'only-first' }).length, 1);
  assert.deepEqual(samplesOf(a, 'batchserve_queue_rows'), []);
  assert.deepEqual(samplesOf(b, 'batchserve_requests_total'), []);
  assert.deepEqual(
    samplesOf(b, 'batchserve_queue_rows').map((s) => s.labels.model),
    ['only-second'],
  );
});

test('the strict parser refuses what a scraper could misread', () => {
  const family = '# HELP h_seconds A histogram, in seconds.\n# TYPE h_seconds histogram\n';
  const valid = `${family}h_seconds_bucket{le="1"} 1\nh_seconds_bucket{le="+Inf"} 2\nh_seconds_sum 3\nh_seconds_count 2\n`;
  assert.equal(parseExposition(valid).get('h_seconds')?.samples.length, 4);
  const broken: [string, RegExp][] = [
    [valid.replace('le="+Inf"} 2', 'le="+Inf"} 0').replace('_count 2', '_count 0'), /cumulative count falls/],
    [`${family}h_seconds_bucket{le="1"} 1\nh_seconds_sum 3\nh_seconds_count 1\n`, /last bucket is not le="\+Inf"/],
    [valid.replace('_count 2', '_count 3'), /\+Inf bucket differs from _count/],
    [valid.replace('h_seconds_sum 3\n', ''), /no _sum/],
    [valid.replace(/^# HELP .*\n/, ''), /has no HELP/],
    [`${valid}other 1\n`, /outside its family/],
    [valid.replace('le="1"', 'le=1'), /bad label/],
    [valid.replace('_sum 3', '_sum three'), /bad value/],
    [valid.trimEnd(), /end with a newline/],
  ];
  for (const [text, why] of broken) assert.throws(() => parseExposition(text), why);
});

test('shadow comparisons: counts by outcome, agreement ratio over compared answers only', async () => {
  const metrics = new ServerMetrics({ collectProcessMetrics: false });
  for (const result of ['agree', 'agree', 'agree', 'disagree', 'failed'] as const) {
    metrics.shadowCompared('m', '2', result, 0.001);
  }
  const families = await scrape(metrics);
  const value = (name: string, labels: Record<string, string>): number | undefined =>
    samplesOf(families, name, labels)[0]?.value;
  assert.equal(value('batchserve_shadow_requests_total', { version: '2', result: 'agree' }), 3);
  assert.equal(value('batchserve_shadow_requests_total', { version: '2', result: 'failed' }), 1);
  assert.equal(value('batchserve_shadow_agreement_ratio', { model: 'm', version: '2' }), 0.75);
  assert.equal(value('batchserve_shadow_duration_seconds_count', { model: 'm', version: '2' }), 4);
});
