// Preloaded into a `serve` (node --import ./benchmarks/trace-batches.js): records the batcher's
// diagnostics channels (src/core/trace-channels.ts) and writes them, one JSON line each, to
// $BATCHSERVE_TRACE_FILE when the process ends. For benchmarks/trace-cycle.js.
import { subscribe } from 'node:diagnostics_channel';
import { writeFileSync } from 'node:fs';

const file = process.env.BATCHSERVE_TRACE_FILE;
if (file) {
  const events = [];
  for (const [name, kind] of [
    ['batchserve:request:queued', 'queued'],
    ['batchserve:batch:dispatched', 'dispatched'],
    ['batchserve:batch:answered', 'answered'],
    ['batchserve:response:written', 'written'],
  ]) {
    subscribe(name, (message) => events.push({ kind, ...message }));
  }
  const flush = () => writeFileSync(file, events.map((event) => JSON.stringify(event)).join('\n'));
  process.once('exit', flush);
}
