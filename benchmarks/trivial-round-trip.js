// The HTTP round trip alone: the bench client sends the same v2 body as to the served model,
// at concurrency 1, to a bare node:http server that reads the body and answers a small canned
// v2 response. served p50 − (in-process T(1) + this p50) is what batchserve itself adds.
// Used by served-vs-in-process.js; runs as two processes:
//   node benchmarks/trivial-round-trip.js serve                      prints the port, serves
//   node benchmarks/trivial-round-trip.js measure PORT PROTOCOL MS   prints {"p50Ms": …}
import { createServer } from 'node:http';
import { randomPayload } from '../dist/src/bench/payload.js';
import { runLoad } from '../dist/src/bench/load-generator.js';

/** The demo model's v2 signature (examples/orientation/model-config.yaml). */
export const DEMO_METADATA = {
  name: 'orientation',
  inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 3, 48, 192] }],
  outputs: [{ name: 'softmax_0.tmp_0', datatype: 'FP32', shape: [-1, 2] }],
};
const ANSWER = Buffer.from(
  JSON.stringify({
    model_name: 'orientation',
    model_version: '1',
    outputs: [{ name: 'softmax_0.tmp_0', datatype: 'FP32', shape: [1, 2], data: [0.9990234375, 0.0009765625] }],
  }),
);

const [role, ...args] = process.argv.slice(2);
if (role === 'serve') {
  const server = createServer((req, res) => {
    req.on('data', () => {});
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': ANSWER.length });
      res.end(ANSWER);
    });
  });
  server.listen(0, '127.0.0.1', () => console.log(server.address().port));
} else if (role === 'measure') {
  const [port, protocol, ms] = args;
  const payload = randomPayload(DEMO_METADATA, { protocol, clientBatch: 1, seed: 1 });
  const result = await runLoad(`http://127.0.0.1:${port}`, payload, {
    level: { kind: 'concurrency', concurrency: 1 },
    warmupMs: Number(ms) / 4,
    windowMs: Number(ms) / 4,
    minWindows: 4,
    maxWindows: 4,
    stabilityPct: 100,
    requestTimeoutMs: 10_000,
  });
  console.log(JSON.stringify({ p50Ms: result.latency.p50, requests: result.requests }));
}
