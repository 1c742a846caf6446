import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fitBatchCost } from '../../src/bench/fit.js';
import { describeRecommendation, renderCsv, renderMarkdown, renderTable } from '../../src/bench/report-table.js';
import type { BenchReport } from '../../src/bench/report-types.js';
import { sampleReport } from './sample-report.js';

/** RFC 4180: fields split on commas, quoted fields may hold commas, CRLF and doubled quotes. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i += 1) {
    const ch = text[i];
    if (quoted) {
      if (ch === '"' && text[i + 1] === '"') {
        field += '"';
        i += 1;
      } else if (ch === '"') quoted = false;
      else field += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ',') {
      row.push(field);
      field = '';
    } else if (ch === '\r' && text[i + 1] === '\n') {
      rows.push([...row, field]);
      row = [];
      field = '';
      i += 1;
    } else field += ch;
  }
  assert.equal(field + row.join(''), '', 'the last record ends with CRLF');
  return rows;
}

test('the terminal table shows every point’s figures, the fit, the speedups, the recommendation and warnings', () => {
  const text = renderTable(sampleReport);
  for (const expected of [
    'B=16 d=2ms i=2',
    'B=1 d=0 i=1',
    '1000/s poisson',
    'c=32',
    '1249.0',
    '8.10',
    '10.53', // p99.9 = 8.1 × 1.3
    '503×12',
    'connection×1',
    '✓',
    '✗',
    '15.40',
    'server: T(B) = c + m·B: c = 2.0',
    'in-process: T(B) = c + m·B:',
    'ceiling 1 + c/m = ',
    'achievable bound',
    'recommended for p99 ≤ 25 ms: B=16 d=2ms i=2, c=8 (1249.0 req/s, p99 8.10 ms; stable)',
    '  max_batch_size: 16\n  dynamic_batching:\n    max_queue_delay: 2ms\n',
    'warning: B=1 d=0 i=1, c=32: 12 errors (503×12)',
  ]) {
    assert.ok(text.includes(expected), `table lacks ${JSON.stringify(expected)}:\n${text}`);
  }
  assert.ok(!text.includes('poor fit'));
  assert.ok(!text.includes('\u001b['), 'no colours when not on a terminal');
});

test('a poor fit is called out, in every text format', () => {
  const poor = fitBatchCost([
    { batchSize: 1, ms: 5, count: 1 },
    { batchSize: 2, ms: 1, count: 1 },
    { batchSize: 4, ms: 6, count: 1 },
  ]);
  assert.ok(poor?.poorFit);
  const report: BenchReport = { ...sampleReport, fit: poor };
  assert.match(renderTable(report), /poor fit \(server\): R² 0\.\d+ < 0\.9/);
  assert.match(renderMarkdown(report), /poor fit \(server\)/);
});

test('a failed fit says so where the ceiling would be, and predicts no speedup, in every text format', () => {
  const failed = fitBatchCost(
    [4, 8, 16, 32].map((batchSize) => ({ batchSize, ms: -21.4 + 10 * batchSize, count: 20 })),
  );
  assert.equal(failed?.failure, 'c < 0');
  const report: BenchReport = {
    ...sampleReport,
    fit: failed,
    inProcess: undefined,
    speedup: sampleReport.speedup.map(({ batchSize, measured }) => ({ batchSize, measured })),
  };
  for (const text of [renderTable(report), renderMarkdown(report)]) {
    assert.match(text, /server: T\(B\) = c \+ m·B: c = -21\.4 ms, m = 10 ms, R² = 1\.000, fit failed: c \\?< 0/);
    assert.match(text, /fit failed \(server\): c \\?< 0, a forward pass cannot cost less than nothing/);
    assert.match(text, /S\(B\): measured only, the server fit failed \(c \\?< 0\)/);
    assert.doesNotMatch(text, /ceiling 1 \+ c\/m|-0\.\d\d×/);
  }
  assert.match(renderTable(report), /\b16[\s│]+—[\s│]+—[\s│]+3\.94×/);
});

test('the speedup table names the fit its predictions come from', () => {
  assert.match(renderTable(sampleReport), /S\(B\) predicted by the server fit:\n/);
  assert.match(renderMarkdown({ ...sampleReport, speedupFit: 'inProcess' }), /S\(B\) predicted by the in-process fit:/);
});

test('Markdown: the same figures as tables, the snippet as a yaml block, user text escaped', () => {
  const report: BenchReport = { ...sampleReport, target: { ...sampleReport.target, model: 'res|net_<b>' } };
  const md = renderMarkdown(report);
  const lines = md.split('\n');
  const results = lines.filter((line) => line.startsWith('| B='));
  assert.equal(results.length, sampleReport.points.length);
  assert.ok(md.includes('| config | load | req/s | items/s | p50 ms |'));
  assert.ok(md.includes('| B=16 d=2ms i=2 | c=8 | 1249.0 | 1249.0 | 6.20 | 7.34 | 8.10 | 10.53 | — |'));
  assert.ok(md.includes('| 16 | 4.0'), 'the speedup table');
  assert.ok(md.includes('```yaml\nmax_batch_size: 16\n'));
  assert.ok(md.includes('# Bench: res|net\\_\\<b\\>'));
  assert.ok(md.includes('- B=16 d=2ms i=1, c=32: not stable'));
});

test('CSV: one row per point, every figure unrounded, one column per error kind', () => {
  const [head, ...rows] = parseCsv(renderCsv(sampleReport));
  assert.ok(head);
  assert.equal(rows.length, sampleReport.points.length);
  assert.ok(head.includes('errors_503') && head.includes('errors_connection'));
  const column = (name: string): number => {
    const index = head.indexOf(name);
    assert.ok(index >= 0, `no column ${name}`);
    return index;
  };
  sampleReport.points.forEach((point, i) => {
    const row = rows[i] ?? [];
    assert.equal(row.length, head.length);
    const number = (name: string): number => Number(row[column(name)]);
    assert.equal(number('max_batch_size'), point.server?.maxBatchSize);
    assert.equal(number('max_queue_delay_us'), point.server?.maxQueueDelayUs);
    assert.equal(number('instances'), point.server?.instances);
    assert.equal(row[column('load_kind')], point.load.kind);
    assert.equal(number('throughput'), point.throughput);
    assert.equal(number('items_per_second'), point.itemsPerSecond);
    assert.equal(number('p50_ms'), point.latency.p50);
    assert.equal(number('p90_ms'), point.latency.p90);
    assert.equal(number('p99_ms'), point.latency.p99);
    assert.equal(number('p999_ms'), point.latency.p999);
    assert.equal(number('error_count'), point.errorCount);
    assert.equal(number('errors_503'), point.errors['503'] ?? 0);
    assert.equal(number('errors_connection'), point.errors['connection'] ?? 0);
    assert.equal(row[column('stable')], String(point.stable));
    assert.equal(number('server_average_batch'), point.serverSide?.averageBatch);
    if (point.load.kind === 'concurrency') {
      assert.equal(number('concurrency'), point.load.concurrency);
      assert.equal(row[column('rate')], '');
    } else {
      assert.equal(number('rate'), point.load.rate);
      assert.equal(row[column('arrival')], point.load.arrival);
    }
  });
});

test('CSV quotes fields holding commas, quotes or line breaks', () => {
  const [first] = sampleReport.points;
  assert.ok(first);
  const odd = { ...first, errors: { 'other, "odd"\nkind': 2 }, errorCount: 2 };
  const [head] = parseCsv(renderCsv({ ...sampleReport, points: [odd] }));
  assert.ok(head?.includes('errors_other, "odd"\nkind'));
});

test('a recommended point that was unstable says so, with how far its windows strayed', () => {
  assert.ok(sampleReport.recommendation);
  const point = {
    ...sampleReport.recommendation.point,
    stable: false,
    variation: { compared: 3, required: 3, limitPct: 10, throughputPct: 4.2, p99Pct: 31.4 },
  };
  const text = describeRecommendation({ ...sampleReport, recommendation: { ...sampleReport.recommendation, point } });
  assert.match(
    text ?? '',
    /; UNSTABLE: p99 varied ±31\.4 %, throughput ±4\.2 % between windows; no stable point met the budget: rerun with a longer --duration\)$/,
  );
});
