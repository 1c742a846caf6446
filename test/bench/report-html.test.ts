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
  for (const name of [
    'server fit: c + m·B',
    'in-process fit: measured',
    'from the server fit:',
    'predicted S(B)',
    'achievable at the load',
    'measured',
  ]) {
    assert.ok(html.includes(`>${name}</text>`), `legend lacks ${name}`);
  }
  assert.match(html, />ceiling 1 \+ c\/m = \d\.\d\d×</);
  assert.match(html, /stroke-dasharray/);
  assert.ok(html.includes('resnet18') && html.includes('AMD EPYC 7763'));
  assert.ok(html.includes('<td>1249.0</td>'), 'the results table');
  assert.ok(html.includes('max_batch_size: 16'), 'the recommended snippet');
});

/** The speedup chart's SVG, from its opening tag to its close. */
function speedupSvg(html: string): string {
  const start = html.indexOf('<title id="chart-speedup-title">');
  assert.ok(start > 0, 'a speedup chart');
  return html.slice(start, html.indexOf('</svg>', start));
}

test('the S(B) chart draws the curve, the ceiling and the rings of the one fit the table uses, and names it', () => {
  const inProcess = sampleReport.inProcess;
  assert.ok(inProcess?.ceiling !== undefined && sampleReport.fit?.ceiling !== undefined);
  const report: BenchReport = { ...sampleReport, speedupFit: 'inProcess' };
  const chart = speedupSvg(renderHtml(report));
  assert.ok(chart.includes('predicted by the in-process fit'), 'the title names the fit');
  assert.ok(chart.includes('>from the in-process fit:</text>'), 'the legend names it');
  assert.match(chart, new RegExp(`>ceiling (1 \\+ c/m = )?${inProcess.ceiling.toFixed(2)}×`));
  assert.ok(!chart.includes('server fit'), 'nothing of the server fit on this chart');
  assert.ok(renderHtml(report).includes('S(B) predicted by the in-process fit'), 'the table above says the same');
});

test('a failed fit draws no line, curve, ceiling or rings, and says why', () => {
  const failed = { c: -21.4, m: 10, r2: 0.954, failure: 'c < 0' as const, poorFit: false, samples: [] };
  const report: BenchReport = {
    ...sampleReport,
    fit: { ...failed, samples: sampleReport.fit?.samples ?? [] },
    inProcess: undefined,
    speedupFit: 'fit',
    speedup: sampleReport.speedup.map(({ batchSize, measured }) => ({ batchSize, measured })),
  };
  const html = renderHtml(report);
  const chart = speedupSvg(html);
  assert.ok(chart.includes('>server fit failed (c &#60; 0)</text>'), chart);
  assert.doesNotMatch(chart, /ceiling|achievable|predicted S/);
  assert.ok(chart.includes('>measured</text>'), 'measured speedups are still drawn');
  assert.ok(html.includes('>server fit failed: c &#60; 0</text>'), 'the T(B) chart names the failure');
  assert.ok(html.includes('fit failed: c &#60; 0'));
  assert.doesNotMatch(html, /NaN|Infinity|-0\.\d\d×/);
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
