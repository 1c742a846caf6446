// The README's A/B walkthrough, client side: sends rendered text lines to a served model, one
// simulated user per request, and posts synthetic feedback for each answer: a conversion
// (reward 1) with a probability chosen per version, so the true difference is known before
// the report is read. Seeded: the same run gives the same rewards.
// Usage: node examples/experiment/simulate-feedback.js URL [--model orientation]
//          [--requests 3000] [--rates 1=0.10,2=0.13] [--concurrency 8] [--seed 1]
import { parseArgs } from 'node:util';
import { textLine } from '../../scripts/text-line.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    model: { type: 'string', default: 'orientation' },
    requests: { type: 'string', default: '3000' },
    rates: { type: 'string', default: '1=0.10,2=0.13' },
    concurrency: { type: 'string', default: '8' },
    seed: { type: 'string', default: '1' },
  },
});
const [url] = positionals;
if (!url)
  throw new Error('usage: node examples/experiment/simulate-feedback.js URL [--requests N] [--rates 1=0.10,2=0.13]');
const rates = new Map(
  values.rates
    .split(',')
    .map((pair) => pair.split('='))
    .map(([v, p]) => [v, Number(p)]),
);
const total = Number(values.requests);

/** mulberry32: a small seeded generator, so a rerun draws the same rewards. */
function seeded(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
// One draw per user, taken up front: answers finish out of order, but user i always gets draw i.
const random = seeded(Number(values.seed));
const draws = Array.from({ length: total }, random);
const images = [textLine(false), textLine(true)];
const counts = new Map();

async function one(index) {
  const answer = await fetch(`${url}/predictions/${values.model}`, {
    method: 'POST',
    headers: { 'content-type': 'image/png', 'x-user': `user-${index}` },
    body: images[index % 2],
  });
  await answer.arrayBuffer();
  if (answer.status !== 200) throw new Error(`request ${index}: HTTP ${answer.status}`);
  const version = answer.headers.get('x-model-version');
  const reward = draws[index] < (rates.get(version) ?? 0) ? 1 : 0;
  const feedback = await fetch(`${url}/v2/models/${values.model}/feedback`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ id: answer.headers.get('x-request-id'), reward }),
  });
  await feedback.arrayBuffer();
  if (feedback.status !== 200) throw new Error(`feedback ${index}: HTTP ${feedback.status}`);
  const [n, conversions] = counts.get(version) ?? [0, 0];
  counts.set(version, [n + 1, conversions + reward]);
}

let next = 0;
await Promise.all(
  Array.from({ length: Number(values.concurrency) }, async () => {
    while (next < total) await one(next++);
  }),
);
for (const [version, [n, conversions]] of [...counts].sort()) {
  console.log(`version ${version}: ${n} requests, ${conversions} conversions (true rate ${rates.get(version)})`);
}
