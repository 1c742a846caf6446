// The plainest greedy generation with the bench decoder, the reference the served engine is
// judged against (generation.js): one onnxruntime-node session on one thread, B prompts of
// equal length batched, one prefill pass, then N − 1 decoding steps, each feeding the step
// before's `present.*` outputs back as `past_key_values.*` as they are (no copy), an attention
// mask of ones and position_ids. A warm-up generation of the same B prompts (`warmupTokens`
// long) runs first, as the served side gets one. Run as a child (generation.js pins it to
// CPU 0), so its memory is its own: prints one JSON line with decode tokens/s = B·(N − 1) ÷
// (end of prefill → end of the last step), prefill ms, VmHWM and VmRSS at the end, and the
// tokens each row chose. Usage: node benchmarks/ort-generation-loop.js MODEL.onnx SPEC.json
// (SPEC: {"prompts": [[ids…], …], "newTokens": N, "warmupTokens": W})
import { readFileSync } from 'node:fs';
import { InferenceSession, Tensor } from 'onnxruntime-node';

const [model, specFile] = process.argv.slice(2);
const { prompts, newTokens, warmupTokens } = JSON.parse(readFileSync(specFile, 'utf8'));
const session = await InferenceSession.create(model, {
  intraOpNumThreads: 1,
  interOpNumThreads: 1,
  executionMode: 'sequential',
});
const layers = session.inputNames.filter((name) => /^past_key_values\.\d+\.key$/.test(name)).length;
const [kvHeads, headDim] = pastDims(session);
const rows = prompts.length;
const promptLength = prompts[0].length;
if (prompts.some((prompt) => prompt.length !== promptLength)) throw new Error('the prompts must be equally long');
// One buffer of ones, long enough for the last step's mask; each step takes its first rows × width.
const ones = new BigInt64Array(rows * (promptLength + Math.max(newTokens, warmupTokens))).fill(1n);

/** Greedy generation of `count` tokens a row; resolves to the timings and the tokens. */
async function generate(count) {
  const ids = new BigInt64Array(rows * promptLength);
  prompts.forEach((prompt, row) => prompt.forEach((id, k) => (ids[row * promptLength + k] = BigInt(id))));
  const positions = new BigInt64Array(rows * promptLength);
  for (let row = 0; row < rows; row++)
    for (let k = 0; k < promptLength; k++) positions[row * promptLength + k] = BigInt(k);
  const feeds = {
    input_ids: new Tensor('int64', ids, [rows, promptLength]),
    attention_mask: new Tensor('int64', ones.subarray(0, rows * promptLength), [rows, promptLength]),
    position_ids: new Tensor('int64', positions, [rows, promptLength]),
  };
  for (let layer = 0; layer < layers; layer++) {
    for (const which of ['key', 'value']) {
      feeds[`past_key_values.${layer}.${which}`] = new Tensor('float32', new Float32Array(0), [
        rows,
        kvHeads,
        0,
        headDim,
      ]);
    }
  }
  const chosen = Array.from({ length: rows }, () => []);
  const started = performance.now();
  let outputs = await session.run(feeds);
  let next = pick(outputs.logits, chosen);
  const prefilled = performance.now();
  for (let step = 1; step < count; step++) {
    const width = promptLength + step;
    const position = BigInt(width - 1);
    feeds.input_ids = new Tensor('int64', next, [rows, 1]);
    feeds.attention_mask = new Tensor('int64', ones.subarray(0, rows * width), [rows, width]);
    feeds.position_ids = new Tensor('int64', new BigInt64Array(rows).fill(position), [rows, 1]);
    for (let layer = 0; layer < layers; layer++) {
      for (const which of ['key', 'value']) {
        feeds[`past_key_values.${layer}.${which}`] = outputs[`present.${layer}.${which}`];
      }
    }
    outputs = await session.run(feeds);
    next = pick(outputs.logits, chosen);
  }
  const ended = performance.now();
  return { prefillMs: prefilled - started, decodeMs: ended - prefilled, chosen };
}

/** Each row's best token at its last position, added to `chosen`; the next step's input_ids. */
function pick(logits, chosen) {
  const [, fed, vocab] = logits.dims;
  const data = logits.data;
  const next = new BigInt64Array(rows);
  for (let row = 0; row < rows; row++) {
    const from = (row * fed + fed - 1) * vocab;
    let best = 0;
    for (let v = 1; v < vocab; v++) if (data[from + v] > data[from + best]) best = v;
    next[row] = BigInt(best);
    chosen[row].push(best);
  }
  return next;
}

function pastDims(opened) {
  const metadata = opened.inputMetadata?.find?.((value) => value.name === 'past_key_values.0.key');
  const [, heads, , dim] = metadata?.shape ?? [];
  if (typeof heads !== 'number' || typeof dim !== 'number')
    throw new Error('past_key_values.0.key has no fixed heads and head_dim');
  return [heads, dim];
}

function statusKiB(field) {
  return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? 0);
}

if (warmupTokens > 0) await generate(warmupTokens);
const { prefillMs, decodeMs, chosen } = await generate(newTokens);
console.log(
  JSON.stringify({
    decodeTokensPerSecond: (rows * (newTokens - 1) * 1000) / decodeMs,
    prefillMs,
    decodeMs,
    peakRssMiB: statusKiB('VmHWM') / 1024,
    endRssMiB: statusKiB('VmRSS') / 1024,
    tokens: chosen,
  }),
);
