/* eslint-disable @typescript-eslint/no-require-imports -- a -r preload is CommonJS: it runs in worker threads too */
// Preloaded beside request-path-hook.cjs (node -r … -r …): between request-path.js's 'reset'
// and 'take' it keeps the stack (async frames included) at each hand-off of the request — a
// timer set on the main thread, its postMessage to the instance's worker, its answer's
// res.end; the worker's session.run and its postMessage back — and on 'take' prints the src
// files on those stacks to stderr: the files a request is handed through from the socket to
// the session and back. request-path-hook.cjs lists every file that ran, consulted ones too.
// Measurement only; the server never loads it.
const http = require('node:http');
const { BroadcastChannel, MessagePort, Worker, isMainThread, threadId } = require('node:worker_threads');

Error.stackTraceLimit = Infinity;
let recording = false;
const stacks = [];
const keep = (at) => {
  if (!recording) return;
  const files = [];
  for (const line of new Error().stack.split('\n').slice(2)) {
    const match = /\/dist\/(src\/[^:]+)\.js:/.exec(line);
    if (match && !files.includes(`${match[1]}.ts`)) files.push(`${match[1]}.ts`);
  }
  if (files.length > 0) stacks.push({ at, files });
};
const wrap = (target, name, at) => {
  const original = target[name];
  target[name] = function (...args) {
    keep(at);
    return original.apply(this, args);
  };
};
if (isMainThread) {
  // A request waits in the queue on a timer or a promise, so the stack when it is queued (a
  // timer set on its way in) shows the files it came down through.
  wrap(globalThis, 'setTimeout', 'timer set');
  wrap(Worker.prototype, 'postMessage', 'main → worker');
  wrap(http.ServerResponse.prototype, 'end', 'answer written');
} else {
  wrap(MessagePort.prototype, 'postMessage', 'worker → main');
  try {
    const ort = require('onnxruntime-node');
    wrap(ort.InferenceSession.prototype, 'run', 'session.run');
  } catch {
    // a worker without onnxruntime (the handler-import probe) has no session to watch
  }
}
const commands = new BroadcastChannel('request-path');
commands.unref();
commands.onmessage = ({ data }) => {
  if (data === 'reset') {
    stacks.length = 0;
    recording = true;
    return;
  }
  recording = false;
  if (stacks.length === 0) return;
  const thread = isMainThread ? 'main' : `worker ${threadId}`;
  process.stderr.write(`${JSON.stringify({ thread, stacks })}\n`);
};
