/* eslint-disable @typescript-eslint/no-require-imports -- a -r preload is CommonJS: it runs in worker threads too */
// Preloaded into every thread of the server by request-path.js (node -r: a preload runs in
// worker threads too, where --import does not): counts each function's calls with V8's
// precise coverage, and on request reports the src files whose functions ran since the last
// report. Measurement only; the server never loads it.
const inspector = require('node:inspector');
const { BroadcastChannel, isMainThread, threadId } = require('node:worker_threads');

const session = new inspector.Session();
session.connect();
const post = (method, params = {}) =>
  new Promise((resolve, reject) =>
    session.post(method, params, (error, result) => (error ? reject(error) : resolve(result))),
  );
const started = post('Profiler.enable').then(() =>
  post('Profiler.startPreciseCoverage', { callCount: true, detailed: false }),
);

const commands = new BroadcastChannel('request-path');
const reports = new BroadcastChannel('request-path-report');
commands.unref();
reports.unref();
commands.onmessage = async ({ data }) => {
  await started;
  // Taking the coverage resets the counts: 'reset' starts a window, 'take' ends it.
  const { result } = await post('Profiler.takePreciseCoverage');
  if (data !== 'take') return;
  const files = {};
  for (const script of result) {
    const at = script.url.indexOf('/dist/src/');
    if (at < 0) continue;
    const called = script.functions.filter((fn) => fn.ranges[0].count > 0);
    if (called.length === 0) continue;
    files[script.url.slice(at + '/dist/'.length).replace(/\.js$/, '.ts')] = called.map(
      (fn) => `${fn.functionName || '(anonymous)'}×${fn.ranges[0].count}`,
    );
  }
  reports.postMessage({ thread: isMainThread ? 'main' : `worker ${threadId}`, files });
};
