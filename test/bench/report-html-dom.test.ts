/**
 * The HTML report as a browser's parser builds it (html-dom.ts): what a reader is shown, and
 * that it agrees with the JSON report it came from.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fitBatchCost, recommend, speedupTable } from '../../src/bench/fit.js';
import { buildReport } from '../../src/bench/report.js';
import { renderHtml } from '../../src/bench/report-html.js';
import { describePoint, describeRecommendation, describeServer } from '../../src/bench/report-table.js';
import type { BenchReport, PointResult } from '../../src/bench/report-types.js';
import { leastDifference } from './colour-vision.js';
import {
  type Element,
  attribute,
  byTag,
  captionOf,
  chart,
  parsePage,
  textOf,
  tooltipOf,
  withAttribute,
} from './html-dom.js';
import { SAMPLE_SLO_P99_MS, samplePoint, samplePoints, sampleReport, sampleServerSamples } from './sample-report.js';

/** The page of `report` once it has been through its JSON file, as a CI script would read it. */
function pageAndJson(report: BenchReport): { page: Element; json: BenchReport } {
  return { page: parsePage(renderHtml(report)), json: JSON.parse(JSON.stringify(report)) as BenchReport };
}

/**
 * The page states one recommendation, the JSON's, with the JSON's stability; every chart that
 * plots the recommended point rings it, and at least one does.
 */
function assertOneRecommendation(page: Element, json: BenchReport): Element {
  const recommended = json.recommendation;
  assert.ok(recommended, 'the JSON recommends a point');
  const label = describePoint(recommended.point);
  const statements = withAttribute(page, 'data-recommendation');
  assert.equal(statements.length, 1, 'one recommendation statement');
  const [statement] = statements as [Element];
  assert.equal(attribute(statement, 'data-recommendation'), label);
  assert.equal(textOf(statement), describeRecommendation(json), 'the text report’s words');
  const sentences = byTag(page, 'p').filter((p) => textOf(p).startsWith('recommended for'));
  assert.equal(sentences.length, 1, 'nothing else on the page recommends');
  const charts = byTag(page, 'svg').filter((svg) => withAttribute(svg, 'data-point', label).length > 0);
  assert.ok(charts.length >= 1, `a chart plots ${label}`);
  for (const svg of charts) {
    const marks = withAttribute(svg, 'data-recommended');
    assert.equal(marks.length, 1, 'one marker per chart that plots it');
    assert.equal(attribute(marks[0] as Element, 'data-recommended'), label);
  }
  assert.equal(withAttribute(page, 'data-recommended').length, charts.length, 'no marker where the point is not');
  return statement;
}

/** Nine configurations: more than the palette has colours. */
const nineConfigurations: BenchReport = {
  ...sampleReport,
  points: [1, 2, 4, 8, 16, 32, 64, 128, 256].map((maxBatchSize, i) =>
    samplePoint(
      [maxBatchSize, 2000, 1],
      { kind: 'concurrency', concurrency: 8 },
      {
        throughput: 300 + 100 * i,
        p50: 5 + i,
        p99: 8 + i,
        averageBatch: Math.min(maxBatchSize, 8),
      },
    ),
  ),
};

test('nine series on the latency chart can be told apart, in colour and by colour-blind readers', () => {
  const series = withAttribute(chart(parsePage(renderHtml(nineConfigurations)), 'chart-latency'), 'data-series');
  assert.equal(series.length, 9);
  const looks = series.map((group) => {
    const [dot] = withAttribute(group, 'data-shape');
    assert.ok(dot, `${attribute(group, 'data-series')} has markers`);
    return {
      name: attribute(group, 'data-series'),
      color: attribute(dot, 'fill') ?? '',
      shape: attribute(dot, 'data-shape'),
    };
  });
  assert.equal(new Set(looks.map(({ color, shape }) => `${color} ${shape}`)).size, 9, 'no two look the same');
  // Colours alone need not all differ (a palette has only so many): where two series share a
  // marker, their colours must stay far apart in every vision.
  for (const [i, a] of looks.entries()) {
    for (const b of looks.slice(i + 1)) {
      if (a.shape !== b.shape) continue;
      const { deltaE, vision } = leastDifference(a.color, b.color);
      assert.ok(
        deltaE >= 15,
        `${a.name} and ${b.name} (${a.color}, ${b.color}) differ by ΔE ${deltaE.toFixed(1)} in ${vision}`,
      );
    }
  }
});

test('one recommendation, the JSON’s, stated once with its stability and ringed on the chart that plots it', () => {
  const { page, json } = pageAndJson(sampleReport);
  const statement = assertOneRecommendation(page, json);
  assert.equal(attribute(statement, 'data-recommendation'), 'B=16 d=2ms i=2, c=8');
  assert.equal(attribute(statement, 'data-stability'), 'stable');
  assert.deepEqual(byTag(statement, 'strong').map(textOf), ['stable']);
  const [mark] = withAttribute(chart(page, 'chart-latency'), 'data-recommended');
  assert.ok(mark);
  assert.equal(attribute(mark, 'aria-label'), 'recommended: B=16 d=2ms i=2, c=8 (stable)');
  assert.equal(tooltipOf(mark), 'recommended: B=16 d=2ms i=2, c=8 (stable)', 'its tooltip');
  assert.ok(textOf(chart(page, 'chart-latency')).includes('recommended (stable)'), 'named in the legend');
});

test('an unstable recommendation is labelled UNSTABLE with its spread, in the statement and on the marker', () => {
  const shaky: PointResult = {
    ...samplePoint(
      [8, 2000, 1],
      { kind: 'concurrency', concurrency: 8 },
      {
        throughput: 1142.9,
        p50: 6.9,
        p99: 9.8,
        averageBatch: 7.6,
        stable: false,
      },
    ),
    variation: { compared: 3, required: 3, limitPct: 10, throughputPct: 4.2, p99Pct: 31.4 },
  };
  const over = samplePoint(
    [1, 0, 1],
    { kind: 'concurrency', concurrency: 8 },
    {
      throughput: 396.1,
      p50: 20.1,
      p99: 34.9,
      averageBatch: 1,
    },
  );
  const recommendation = recommend([shaky, over], SAMPLE_SLO_P99_MS);
  assert.equal(recommendation?.point, shaky, 'the only point inside the budget');
  const { page, json } = pageAndJson({ ...sampleReport, points: [shaky, over], recommendation });
  const statement = assertOneRecommendation(page, json);
  const spread = 'UNSTABLE: p99 varied ±31.4 %, throughput ±4.2 % between windows';
  assert.equal(attribute(statement, 'data-stability'), 'unstable');
  assert.deepEqual(byTag(statement, 'strong').map(textOf), [spread]);
  const [mark] = withAttribute(page, 'data-recommended');
  assert.equal(attribute(mark as Element, 'aria-label'), `recommended: B=8 d=2ms i=1, c=8 (${spread})`);
  assert.ok(textOf(chart(page, 'chart-latency')).includes('recommended (UNSTABLE)'));
});

test('with --plan the one recommendation is the configuration the plan sized replicas for', () => {
  const [planned] = samplePoints.filter((point) => point.load.kind === 'rate');
  assert.ok(planned?.server);
  const report = buildReport({
    target: sampleReport.target,
    points: samplePoints,
    serverSamples: [...sampleServerSamples],
    sloP99Ms: SAMPLE_SLO_P99_MS,
    plan: {
      targetRate: 4500,
      sloP99Ms: SAMPLE_SLO_P99_MS,
      searches: [{ server: planned.server, sustainedRate: 1000, probes: [{ rate: 1000, sustained: true }] }],
    },
  });
  assert.equal(report.plan?.point, planned);
  const alone = recommend(samplePoints, SAMPLE_SLO_P99_MS)?.point;
  assert.ok(alone && describeServer(alone.server) !== describeServer(planned.server), 'without the plan, another');
  const { page, json } = pageAndJson(report);
  const statement = assertOneRecommendation(page, json);
  assert.equal(attribute(statement, 'data-recommendation'), describePoint(planned));
  assert.ok(textOf(page).includes(`one replica sustains 1000 req/s at ${describeServer(planned.server)}`));
});

/** The latency chart's SLO line, if drawn, and the y at which it is drawn. */
function sloLine(page: Element): { y: number; name: string } | undefined {
  const [line] = withAttribute(chart(page, 'chart-latency'), 'data-reference', 'slo');
  if (!line) return undefined;
  const [stroke] = byTag(line, 'line');
  assert.ok(stroke && attribute(stroke, 'y1') === attribute(stroke, 'y2'), 'horizontal');
  return { y: Number(attribute(stroke, 'y1')), name: textOf(line) };
}

test('the p99 SLO is a labelled line on the latency chart when bench had one, and absent when not', () => {
  const { page, json } = pageAndJson(sampleReport);
  assert.equal(json.sloP99Ms, SAMPLE_SLO_P99_MS);
  const slo = sloLine(page);
  assert.ok(slo, 'an SLO line');
  assert.equal(slo.name, 'p99 SLO 25 ms');
  // The recommendation is inside the budget, so below the line (SVG's y grows downward).
  const [ring] = byTag(withAttribute(page, 'data-recommended')[0] as Element, 'circle');
  assert.ok(Number(attribute(ring as Element, 'cy')) > slo.y, 'the recommended point sits under the line');
  const without = pageAndJson({ ...sampleReport, sloP99Ms: undefined, recommendation: undefined }).page;
  assert.equal(sloLine(without), undefined);
  assert.equal(withAttribute(without, 'data-recommended').length, 0);
  assert.equal(withAttribute(without, 'data-recommendation').length, 0);
});

test('each table scrolls inside its own box instead of widening the page', () => {
  const { page } = pageAndJson(sampleReport);
  const tables = byTag(page, 'table');
  assert.equal(tables.length, 2, 'the speedup table and the results');
  for (const table of tables) {
    const box = table.parentNode as Element;
    assert.equal(box.tagName, 'div');
    assert.equal(attribute(box, 'class'), 'table-scroll');
    assert.equal(attribute(box, 'role'), 'region', 'named for a screen reader');
    assert.equal(attribute(box, 'tabindex'), '0', 'scrollable from the keyboard');
  }
  const [style] = byTag(page, 'style');
  assert.match(textOf(style as Element), /\.table-scroll \{[^}]*overflow-x: auto/);
});

/** What each chart draws and what its caption says of it. */
function linesAndCaptions(report: BenchReport): {
  speedup: { caption: string; ceiling: boolean };
  batchCost: { caption: string; fitLines: number; dashedFitLines: number };
} {
  const page = parsePage(renderHtml(report));
  const speedup = chart(page, 'chart-speedup');
  const batchCost = chart(page, 'chart-batch-cost');
  const fitLines = withAttribute(batchCost, 'data-series')
    .filter((group) => attribute(group, 'data-series')?.endsWith(': c + m·B'))
    .flatMap((group) => byTag(group, 'polyline'));
  return {
    speedup: { caption: captionOf(speedup), ceiling: withAttribute(speedup, 'data-reference').length > 0 },
    batchCost: {
      caption: captionOf(batchCost),
      fitLines: fitLines.length,
      dashedFitLines: fitLines.filter((line) => attribute(line, 'stroke-dasharray') !== undefined).length,
    },
  };
}

test('the captions name a fitted or dashed line only when the chart draws it, and say why when not', () => {
  const failedFit = { c: -21.4, m: 10, r2: 0.954, failure: 'c < 0' as const, poorFit: false };
  const farCeiling = fitBatchCost(
    [1, 2, 4, 8, 16].map((batchSize) => ({ batchSize, ms: 50 + 0.5 * batchSize, count: 100 })),
  );
  assert.ok(farCeiling?.ceiling !== undefined && farCeiling.ceiling > 100);
  const reports: Record<string, BenchReport> = {
    'both fits, the ceiling drawn': sampleReport,
    'the server fit failed': {
      ...sampleReport,
      fit: { ...failedFit, samples: sampleReport.fit?.samples ?? [] },
      inProcess: undefined,
      speedup: sampleReport.speedup.map(({ batchSize, measured }) => ({ batchSize, measured })),
    },
    'the ceiling far above the curves': {
      ...sampleReport,
      fit: farCeiling,
      inProcess: undefined,
      speedup: speedupTable(farCeiling, samplePoints),
    },
    'no fit at all': { ...sampleReport, fit: undefined, inProcess: undefined, speedupFit: undefined, speedup: [] },
  };
  const seen = Object.fromEntries(Object.entries(reports).map(([name, report]) => [name, linesAndCaptions(report)]));
  for (const [name, { speedup, batchCost }] of Object.entries(seen)) {
    assert.equal(/dashed/.test(speedup.caption), speedup.ceiling, `${name}: S(B) caption “${speedup.caption}”`);
    assert.equal(
      /line crosses/.test(batchCost.caption),
      batchCost.fitLines > 0,
      `${name}: T(B) “${batchCost.caption}”`,
    );
    assert.equal(
      /dashed/.test(batchCost.caption),
      batchCost.dashedFitLines > 0,
      `${name}: T(B) “${batchCost.caption}”`,
    );
  }
  assert.ok(seen['both fits, the ceiling drawn']?.speedup.ceiling, 'a case that draws the ceiling');
  assert.equal(seen['both fits, the ceiling drawn']?.batchCost.dashedFitLines, 1, 'and the dashed in-process line');
  assert.match(
    seen['the server fit failed']?.speedup.caption ?? '',
    /measured only: the server fit failed \(c < 0\), so it predicts nothing/,
  );
  assert.match(
    seen['the server fit failed']?.batchCost.caption ?? '',
    /no line is drawn: the server fit failed \(c < 0\)/,
  );
  assert.match(
    seen['the ceiling far above the curves']?.speedup.caption ?? '',
    /ceiling 1 \+ c\/m = \d+\.\d\d× is too far above to draw/,
  );
  assert.match(
    seen['no fit at all']?.batchCost.caption ?? '',
    /no line: the server reported fewer than two batch sizes/,
  );
});
