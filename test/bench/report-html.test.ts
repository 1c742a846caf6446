import { test } from 'node:test';
import assert from 'node:assert/strict';
import { renderHtml } from '../../src/bench/report-html.js';
import type { BenchReport } from '../../src/bench/report-types.js';
import { sampleReport } from './sample-report.js';

const hostile: BenchReport = {
  ...sampleReport,
  target: { ...sampleReport.target, model: '<img onerror=x>' },
  warnings: ['<script>alert(1)</script> & "quotes"'],
};

test('one page with three charts, each titled, labelled and with a legend', () => {
  const html = renderHtml(sampleReport);
  assert.equal(html.match(/<svg\b/g)?.length, 3);
  for (const id of ['chart-latency', 'chart-batch-cost', 'chart-speedup']) {
    assert.match(html, new RegExp(`<title id="${id}-title">[^<]+</title>`));
    assert.match(html, new RegExp(`aria-labelledby="${id}-title ${id}-desc"`));
  }
  assert.equal(html.match(/role="img" aria-label="[^"]+"/g)?.length, 3);
  // The latency chart's legend names every configuration; the others their curves.
  for (const name of ['B=1 d=0 i=1', 'B=8 d=2ms i=1', 'B=16 d=2ms i=1', 'B=16 d=2ms i=2']) {
    assert.ok(html.includes(`>${name}</text>`), `legend lacks ${name}`);
  }
  for (const name of ['server: c + m·B', 'in-process: measured', 'predicted S(B)', 'measured']) {
    assert.ok(html.includes(`>${name}</text>`), `legend lacks ${name}`);
  }
  assert.match(html, />ceiling 1 \+ c\/m = \d\.\d\d×</);
  assert.match(html, /stroke-dasharray/);
  assert.ok(html.includes('resnet18') && html.includes('AMD EPYC 7763'));
  assert.ok(html.includes('<td>1249.0</td>'), 'the results table');
  assert.ok(html.includes('max_batch_size: 16'), 'the recommended snippet');
});

test('the page loads nothing from anywhere', () => {
  const html = renderHtml(sampleReport);
  assert.doesNotMatch(html, /<script/i);
  assert.doesNotMatch(html, /<link\b/i);
  assert.doesNotMatch(html, /<img\b/i);
  assert.doesNotMatch(html, /\b(?:src|href|xlink:href)\s*=/i);
  assert.doesNotMatch(html, /url\(/i);
  assert.doesNotMatch(html, /@import/i);
  // The only address on the page is the target's, shown as text.
  assert.deepEqual(html.match(/https?:\/\/[^\s<"]*/g), ['http://127.0.0.1:8000']);
  assert.match(html, /Content-Security-Policy" content="default-src 'none'/);
});

test('user text is escaped everywhere it appears', () => {
  const html = renderHtml(hostile);
  assert.ok(!html.includes('<img onerror=x>'));
  assert.ok(html.includes('&#60;img onerror=x&#62;'));
  assert.ok(!html.includes('<script>'));
  assert.ok(html.includes('&#60;script&#62;alert(1)&#60;/script&#62; &#38; &#34;quotes&#34;'));
});

test('a report without points or fits still draws three charts, saying what is missing', () => {
  const empty: BenchReport = {
    ...sampleReport,
    points: [],
    fit: undefined,
    inProcess: undefined,
    speedup: [],
    recommendation: undefined,
    warnings: [],
  };
  const html = renderHtml(empty);
  assert.equal(html.match(/<svg\b/g)?.length, 3);
  assert.ok(html.includes('no points were measured'));
  assert.ok(html.includes('the server reported fewer than two batch sizes'));
  assert.doesNotMatch(html, /NaN|Infinity/);
});
