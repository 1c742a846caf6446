// Renders bench's HTML report in headless Chromium and checks what a reader's browser would
// show, beyond what the suite's parse5 checks (test/bench/report-html-dom.test.ts) can see:
// that the recommendation's ring is laid out on the chart, and that at a narrow window the
// results table scrolls in its own box while the page keeps the window's width.
//
// Not part of `npm test` (it needs a browser). Usage, after `npm run build`:
//   node scripts/report-check.js [OUT_DIR]     (default /tmp/batchserve-report-check)
// Chromium is `chromium` on PATH, or $CHROMIUM; on Debian `apt-get install -y chromium`.
// OUT_DIR gets the pages and a screenshot of each at 1200 and 600 pixels wide, to look at.
import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const dist = new URL('../dist/', import.meta.url);
const { renderHtml } = await import(new URL('src/bench/report-html.js', dist).href);
const { recommend } = await import(new URL('src/bench/fit.js', dist).href);
const { describePoint } = await import(new URL('src/bench/report-table.js', dist).href);
const { sampleReport, samplePoint, SAMPLE_SLO_P99_MS } = await import(
  new URL('test/bench/sample-report.js', dist).href
);

const out = process.argv[2] ?? '/tmp/batchserve-report-check';
const chromium = process.env.CHROMIUM ?? 'chromium';
const NARROW = 600;

/** Nine configurations; the only one inside the budget, the first, measured unstable. */
function unstableReport() {
  const points = [1, 2, 4, 8, 16, 32, 64, 128, 256].map((maxBatchSize, i) => ({
    ...samplePoint(
      [maxBatchSize, 2000, 1],
      { kind: 'concurrency', concurrency: 8 },
      { throughput: 300 + 100 * i, p50: 12 + 2 * i, p99: 24 + 3 * i, averageBatch: Math.min(maxBatchSize, 8) },
    ),
    ...(i === 0
      ? { stable: false, variation: { compared: 3, required: 3, limitPct: 10, throughputPct: 4.2, p99Pct: 31.4 } }
      : {}),
  }));
  return { ...sampleReport, points, recommendation: recommend(points, SAMPLE_SLO_P99_MS) };
}

/**
 * The page with an inline script allowed and added, which writes the layout's figures onto
 * <body> for --dump-dom to show; the page itself forbids all scripts.
 */
function probed(html) {
  const probe = `<script>
addEventListener('load', () => {
  const boxes = [...document.querySelectorAll('.table-scroll')];
  const results = boxes[boxes.length - 1];
  const marks = [...document.querySelectorAll('[data-recommended]')].filter((mark) => {
    const box = mark.getBoundingClientRect();
    const chart = mark.closest('svg').getBoundingClientRect();
    return box.width > 0 && box.left >= chart.left && box.right <= chart.right;
  });
  Object.assign(document.body.dataset, {
    checkWindowWidth: innerWidth,
    checkPageWidth: document.documentElement.scrollWidth,
    checkTableScrollWidth: results.scrollWidth,
    checkTableBoxWidth: results.clientWidth,
    checkMarksLaidOut: marks.length,
    checkRecommendation: document.querySelector('[data-recommendation]')?.dataset.recommendation ?? '',
  });
});
</script>`;
  return html
    .replace("style-src 'unsafe-inline'", "style-src 'unsafe-inline'; script-src 'unsafe-inline'")
    .replace('</body>', `${probe}\n</body>`);
}

async function chrome(...args) {
  const common = ['--headless', '--no-sandbox', '--disable-gpu', '--hide-scrollbars', '--virtual-time-budget=2000'];
  const { stdout } = await run(chromium, [...common, ...args], { maxBuffer: 64 * 1024 * 1024, timeout: 60_000 });
  return stdout;
}

await mkdir(out, { recursive: true });
console.log(`${(await run(chromium, ['--version'])).stdout.trim()}, Node ${process.version}`);
let failures = 0;
const check = (ok, what) => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures += 1;
};

for (const [name, report] of [
  ['sample', sampleReport],
  ['unstable', unstableReport()],
]) {
  const page = join(out, `${name}.html`);
  const probe = join(out, `${name}-probe.html`);
  await writeFile(page, renderHtml(report));
  await writeFile(probe, probed(renderHtml(report)));
  for (const width of [1200, NARROW]) {
    await chrome(
      `--window-size=${width},3000`,
      `--screenshot=${join(out, `${name}-${width}.png`)}`,
      pathToFileURL(page).href,
    );
  }
  const dom = await chrome(`--window-size=${NARROW},3000`, '--dump-dom', pathToFileURL(probe).href);
  const figure = (key) => /<body[^>]*>/.exec(dom)?.[0].match(new RegExp(`data-check-${key}="([^"]*)"`))?.[1];
  const expected = describePoint(report.recommendation.point);
  check(figure('window-width') === String(NARROW), `${name}: rendered at ${NARROW} px (${figure('window-width')})`);
  check(figure('recommendation') === expected, `${name}: recommends ${figure('recommendation')}, as the JSON does`);
  check(
    Number(figure('marks-laid-out')) >= 1,
    `${name}: ${figure('marks-laid-out')} recommendation marker(s) laid out inside a chart`,
  );
  check(
    Number(figure('page-width')) <= NARROW,
    `${name}: the page is ${figure('page-width')} px wide in a ${NARROW} px window`,
  );
  check(
    Number(figure('table-scroll-width')) > Number(figure('table-box-width')),
    `${name}: the results table (${figure('table-scroll-width')} px) scrolls in its ${figure('table-box-width')} px box`,
  );
}
console.log(`screenshots and pages in ${out}`);
process.exitCode = failures === 0 ? 0 : 1;
