/**
 * The HTML report as a browser's parser builds it (html-dom.ts): what a reader is shown, and
 * that it agrees with the JSON report it came from.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { renderHtml } from '../../src/bench/report-html.js';
import type { BenchReport } from '../../src/bench/report-types.js';
import { leastDifference } from './colour-vision.js';
import { attribute, chart, parsePage, withAttribute } from './html-dom.js';
import { samplePoint, sampleReport } from './sample-report.js';

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
