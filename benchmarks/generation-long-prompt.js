// generation.js, part 3 (report only): what a long prompt joining costs the short streams
// already decoding, on the bench decoder. K closed-loop streaming clients send short prompts;
// their time to first token is measured alone, then while one more client keeps sending long
// prompts, alone, loaded, loaded, alone on one server. A joining prompt whose padding would
// more than double the step's tokens runs a prefill step of its own, which every decoding row
// waits for, and then shares the batch (left-padded to its length).
// Each phase sends for warmup + duration (the long client from the short streams' first
// token on); a short request counts when it was sent after the warm-up and before the end,
// its first token however late; the chunks of text the short streams got during the window
// give their tokens/s. At the end each request still running is cut once it has its first token.
import { Agent } from 'undici';
import { streamCompletion } from './completion-stream.js';
import { serveChild } from './serve-child.js';

const { SERVING_NODE_FLAGS } = await import('../dist/src/core/serving-node-flags.js');

/** p50 and p99 as the bench's client takes them (the sample at ⌈q·n⌉). */
function percentiles(values) {
  if (values.length === 0) return { p50: null, p99: null };
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
  return { p50: at(0.5), p99: at(0.99) };
}

async function phase(url, model, { short, long }, loaded, settings) {
  const { clients, maxTokens, longMaxTokens, warmupMs, durationMs } = settings;
  const from = performance.now() + warmupMs;
  const until = from + durationMs;
  const dispatcher = new Agent({ connections: clients + 1, pipelining: 1 });
  const firsts = { short: [], long: [] };
  const errors = {};
  let chunks = 0;
  // The long client starts once the short streams decode, so its prompts join running rows.
  let decoding;
  const shortsDecode = new Promise((resolve) => (decoding = resolve));
  const client = async (kind, prompt, tokens) => {
    if (kind === 'long') await shortsDecode;
    while (performance.now() < until) {
      const cut = new AbortController();
      const sentAt = performance.now();
      let first = true;
      const onText = (at) => {
        if (first && sentAt >= from) firsts[kind].push(at - sentAt);
        if (kind === 'short') decoding();
        first = false;
        if (kind === 'short' && at >= from && at <= until) chunks++;
        if (at > until) cut.abort();
      };
      try {
        await streamCompletion(url, model, prompt.text, tokens, dispatcher, { signal: cut.signal, onText });
      } catch (error) {
        if (cut.signal.aborted) continue;
        const message = error instanceof Error ? error.message : String(error);
        errors[message] = (errors[message] ?? 0) + 1;
      }
    }
  };
  try {
    await Promise.all([
      ...Array.from({ length: clients }, () => client('short', short, maxTokens)),
      ...(loaded ? [client('long', long, longMaxTokens)] : []),
    ]);
  } finally {
    await dispatcher.close();
  }
  return {
    loaded,
    requests: firsts.short.length,
    firstTokenMs: percentiles(firsts.short),
    shortTokensPerSecond: (chunks * 1000) / durationMs,
    longRequests: firsts.long.length,
    longFirstTokenMs: percentiles(firsts.long).p50,
    errors,
    samples: firsts.short.map((value) => Math.round(value * 10) / 10),
  };
}

/** Alone, loaded, loaded, alone on one fresh server; `log` hears each phase. */
export async function measureLongPrompt(settings, { archive, modelName, dir, pinned, prompts, log }) {
  const server = await serveChild({ name: modelName, archive, dir, pinned, nodeFlags: SERVING_NODE_FLAGS });
  const url = `${server.urls.inference.replace(/\/$/, '')}/v1/completions`;
  try {
    const phases = [];
    for (const loaded of [false, true, true, false]) {
      phases.push(await phase(url, modelName, prompts, loaded, settings));
      log(phases.at(-1));
    }
    const pooled = (loaded) =>
      percentiles(phases.filter((each) => each.loaded === loaded).flatMap((each) => each.samples));
    const alone = pooled(false);
    const withLong = pooled(true);
    return {
      alone,
      loaded: withLong,
      ratio: { p50: withLong.p50 / alone.p50, p99: withLong.p99 / alone.p99 },
      control: phases[3].firstTokenMs.p50 / phases[0].firstTokenMs.p50,
      shortTokensPerSecond: {
        alone: (phases[0].shortTokensPerSecond + phases[3].shortTokensPerSecond) / 2,
        loaded: (phases[1].shortTokensPerSecond + phases[2].shortTokensPerSecond) / 2,
      },
      longRequests: phases.reduce((sum, each) => sum + each.longRequests, 0),
      phases,
    };
  } finally {
    await server.stop();
  }
}
