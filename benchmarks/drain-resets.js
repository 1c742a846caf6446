// Does a drain lose requests? A real `serve` of the test suite's affine model, 16 keep-alive
// clients (node:http's Agent) each sending its next inference as soon as its last is answered,
// and SIGTERM once every client has had its warm-up answers: the drain lands while requests
// are on the way on kept connections. A client stops at its first failure: after the drain,
// the answer that says `Connection: close` sends it to a new connection, which the closed
// listener refuses (ECONNREFUSED: a request the server never received). Anything else a
// client ends on — a reset (ECONNRESET: a request sent on a kept connection and never
// answered), a request that hangs, a 5xx other than 503 — counts against the drain, as does
// an exit code other than 0. Aim: no reset and no hang in any run, every run exiting 0.
// Writes benchmarks/results/drain-resets.json (see results.js for --quick, --check, --json).
// Usage: npm run bench:drain [-- --quick] [-- --check]
import { mkdtemp, rm } from 'node:fs/promises';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { drainResets as render } from './render.js';
import { benchFlags, exitOnMissed, resultRecord, writeResult } from './results.js';
import { serveChild } from './serve-child.js';

const { affineRequest, packAffine } = await import('../dist/test/fixtures/server.js');

const flags = benchFlags('drain-resets');
const settings = { runs: flags.quick ? 3 : 20, clients: 16, warmAnswers: 20, requestTimeoutMs: 30_000 };
const BODY = affineRequest([[1, 2, 3, 4]]);

/** One POST on `agent`: resolves with the status, rejects with the socket's error (its code). */
function infer(agent, url) {
  return new Promise((resolve, reject) => {
    const call = request(url, { agent, method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
      res.on('error', reject);
    });
    call.setTimeout(settings.requestTimeoutMs, () => call.destroy(Object.assign(new Error('hung'), { code: 'HANG' })));
    call.on('error', reject);
    call.end(BODY);
  });
}

/** One serve, its clients, SIGTERM mid-run: answers by status, how each client ended, the exit code. */
async function run(archive, dir, index) {
  const server = await serveChild({ name: 'affine', archive, dir });
  const url = `${server.urls.inference}/v2/models/affine/infer`;
  const agent = new Agent({ keepAlive: true, maxSockets: settings.clients });
  const answers = {};
  const ends = {};
  let warmed = 0;
  let signalled;
  const allWarm = new Promise((resolve) => (signalled = resolve));
  const client = async () => {
    for (let sent = 1; ; sent++) {
      try {
        const status = await infer(agent, url);
        answers[status] = (answers[status] ?? 0) + 1;
      } catch (error) {
        const code = error.code ?? error.message;
        ends[code] = (ends[code] ?? 0) + 1;
        return;
      }
      if (sent === settings.warmAnswers && ++warmed === settings.clients) signalled();
    }
  };
  const clients = Array.from({ length: settings.clients }, client);
  await allWarm;
  const exitCode = await server.stop();
  await Promise.all(clients);
  agent.destroy();
  return { run: index, answers, ends, exitCode };
}

function summarize(runs) {
  const sum = (pick) => runs.reduce((total, one) => total + pick(one), 0);
  const resets = sum((one) => one.ends.ECONNRESET ?? 0);
  const hangs = sum((one) => one.ends.HANG ?? 0);
  const otherEnds = sum((one) =>
    Object.entries(one.ends)
      .filter(([code]) => !['ECONNREFUSED', 'ECONNRESET', 'HANG'].includes(code))
      .reduce((total, [, count]) => total + count, 0),
  );
  const errorAnswers = sum((one) =>
    Object.entries(one.answers)
      .filter(([status]) => Number(status) >= 500 && Number(status) !== 503)
      .reduce((total, [, count]) => total + count, 0),
  );
  const badExits = runs.filter((one) => one.exitCode !== 0).length;
  return {
    requests: sum((one) => Object.values(one.answers).reduce((total, count) => total + count, 0)),
    served: sum((one) => one.answers[200] ?? 0),
    refusedWith503: sum((one) => one.answers[503] ?? 0),
    resets,
    hangs,
    otherEnds,
    errorAnswers,
    badExits,
    verdicts: [
      { key: 'resets', aim: '= 0', met: resets === 0 },
      { key: 'hangs', aim: '= 0', met: hangs === 0 },
      { key: 'other failures and 5xx but 503', aim: '= 0', met: otherEnds + errorAnswers === 0 },
      { key: 'runs exiting other than 0', aim: '= 0', met: badExits === 0 },
    ],
  };
}

const dir = await mkdtemp(join(tmpdir(), 'batchserve-drain-'));
const record = resultRecord('drain-resets', flags, { settings, runs: [] });
try {
  const archive = await packAffine(dir);
  console.log(render.header(record));
  for (let index = 1; index <= settings.runs; index++) {
    record.runs.push(await run(archive, dir, index));
    console.log(render.run(record.runs.at(-1)));
  }
  record.summary = summarize(record.runs);
  console.log(render.summary(record));
  await writeResult(flags.json, record);
  exitOnMissed(
    flags,
    record.summary.verdicts.map(({ key, aim, met }) => ({ label: `${key} ${aim}`, met })),
  );
} finally {
  await rm(dir, { recursive: true, force: true });
}
