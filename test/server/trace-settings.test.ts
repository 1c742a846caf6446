import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TraceSettings } from '../../src/server/trace-settings.js';

const draws = (settings: TraceSettings, model: string, parentSampled: boolean, times: number): number =>
  Array.from({ length: times }, () => settings.sample(model, parentSampled)).filter(Boolean).length;

test("Triton's trace settings: a model's own over the global ones, null and an empty body give them back, trace_count counts down, level OFF stops even sampled parents", () => {
  const settings = new TraceSettings(1, true);
  assert.equal(draws(settings, 'a', false, 5), 5, 'ratio 1: every request');
  assert.deepEqual(settings.update(undefined, { trace_rate: '0' }).trace_rate, '0');
  assert.equal(draws(settings, 'a', false, 5), 0, 'rate 0: none without a sampled parent…');
  assert.equal(draws(settings, 'a', true, 5), 5, '…and every one with');

  // A model's first settings copy the global ones it does not name.
  assert.deepEqual(settings.update('b', { trace_count: '2', trace_rate: '1' }), {
    trace_level: ['TIMESTAMPS'],
    trace_rate: '1',
    trace_count: '2',
    trace_mode: 'opentelemetry',
  });
  assert.equal(draws(settings, 'b', false, 5), 2, 'two traces, then the count is spent');
  assert.equal(settings.read('b').trace_count, '0');
  assert.equal(settings.read().trace_count, '-1', 'the global count untouched');
  assert.equal(settings.update('b', { trace_count: null }).trace_count, '-1', 'null: the global setting again');
  assert.equal(settings.read('b').trace_rate, '1', 'the others stay the model’s');
  assert.deepEqual(settings.update('b', {}), settings.read(), 'an empty body: all of them the global ones');

  settings.update('c', { trace_level: ['OFF'] });
  assert.equal(draws(settings, 'c', true, 3), 0);
  assert.equal(draws(settings, 'a', true, 3), 3);
  assert.throws(() => settings.update(undefined, { trace_rate: null }), { code: 'BS_ERR_TRACE_SETTING' });
  assert.throws(() => settings.update(undefined, { trace_count: '-2' }), { code: 'BS_ERR_TRACE_SETTING' });
  assert.throws(() => settings.update(undefined, { trace_mode: 'triton' }), { code: 'BS_ERR_TRACE_SETTING' });
  assert.throws(() => settings.update(undefined, { log_frequency: '10' }), /Triton's own trace files/);
  assert.throws(() => settings.update(undefined, []), { code: 'BS_ERR_TRACE_SETTING' });
  assert.throws(() => new TraceSettings(1, false).update(undefined, { trace_rate: '1' }), {
    code: 'BS_ERR_TRACING_OFF',
  });
  assert.equal(new TraceSettings(1, false).sample('a', true), false, 'nothing traced without an exporter');
});
