// generation.js, part 1: the served engine against the plain loop (ort-generation-loop.js) on
// the bench decoder, the same B prompts of P tokens, N new tokens each, greedy. Each run is a
// fresh process on CPU 0, so its VmHWM is its own: the loop, or a `serve` child (Node started
// with SERVING_NODE_FLAGS, so the pid is the server's and not its launcher's) whose B streamed
// /v1/completions this process (on CPU 1) starts together. Both sides have one warm-up
// generation of the same prompts first, both measure decoding only: the loop from the end of
// its prefill pass, the client from T0, the moment every stream has had its first token.
import { execFileSync } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent } from 'undici';
import { streamCompletion } from './completion-stream.js';
import { serveChild } from './serve-child.js';

const { SERVING_NODE_FLAGS } = await import('../dist/src/core/serving-node-flags.js');
const LOOP = fileURLToPath(new URL('ort-generation-loop.js', import.meta.url));
const RSS_SAMPLE_MS = 50;

/** The plain loop in a child on CPU 0 (when pinned): its printed figures and the tokens it chose. */
export async function runLoop({ decoder, prompts, newTokens, warmupTokens, dir, pinned }) {
  const spec = join(dir, 'loop-spec.json');
  await writeFile(spec, JSON.stringify({ prompts: prompts.map((prompt) => prompt.ids), newTokens, warmupTokens }));
  const args = [LOOP, decoder.model, spec];
  const printed = pinned
    ? execFileSync('taskset', ['-c', '0', process.execPath, ...args], { stdio: ['ignore', 'pipe', 'inherit'] })
    : execFileSync(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  return JSON.parse(printed.toString());
}

/**
 * One served run on a fresh server: a warm-up generation, then B streams started together,
 * /proc/PID/status's VmRSS sampled every 50 ms meanwhile and its VmHWM read at the end.
 */
export async function runServed({ archive, modelName, decoder, prompts, newTokens, warmupTokens, dir, pinned }) {
  const server = await serveChild({ name: modelName, archive, dir, pinned, nodeFlags: SERVING_NODE_FLAGS });
  const dispatcher = new Agent({ connections: prompts.length, pipelining: 1 });
  try {
    const url = `${server.urls.inference.replace(/\/$/, '')}/v1/completions`;
    const all = (maxTokens) =>
      Promise.all(prompts.map((prompt) => streamCompletion(url, modelName, prompt.text, maxTokens, dispatcher)));
    await all(warmupTokens);
    let sampledKiB = 0;
    const sampler = setInterval(() => {
      readFile(`/proc/${server.pid}/status`, 'utf8').then(
        (status) => (sampledKiB = Math.max(sampledKiB, statusKiB(status, 'VmRSS'))),
        () => undefined,
      );
    }, RSS_SAMPLE_MS);
    const streams = await all(newTokens).finally(() => clearInterval(sampler));
    const status = await readFile(`/proc/${server.pid}/status`, 'utf8');
    return {
      ...decodeFigures(streams),
      peakRssMiB: statusKiB(status, 'VmHWM') / 1024,
      sampledRssMiB: Math.max(sampledKiB, statusKiB(status, 'VmRSS')) / 1024,
      streams: streams.map((stream) => ({
        chunks: stream.arrivals.length,
        promptTokens: stream.usage?.prompt_tokens,
        completionTokens: stream.usage?.completion_tokens,
        tokens: stream.text
          .split(' ')
          .filter((word) => word !== '')
          .map((word) => decoder.vocab[word] ?? -1),
      })),
    };
  } finally {
    await dispatcher.close();
    await server.stop();
  }
}

/**
 * Decode tokens/s as the loop counts it: the text chunks that arrived after T0 (the moment
 * the last stream had its first) ÷ (the last arrival − T0); time to first token, the slowest stream's.
 */
export function decodeFigures(streams) {
  const t0 = Math.max(...streams.map((stream) => stream.arrivals[0] ?? Infinity));
  const last = Math.max(...streams.map((stream) => stream.arrivals.at(-1) ?? -Infinity));
  const after = streams.reduce((sum, stream) => sum + stream.arrivals.filter((at) => at > t0).length, 0);
  return {
    decodeTokensPerSecond: (after * 1000) / (last - t0),
    tokensAfterT0: after,
    decodeMs: last - t0,
    firstTokenMs: Math.max(...streams.map((stream) => stream.arrivals[0] - stream.sentAt)),
  };
}

function statusKiB(status, field) {
  return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
}
