import { mulberry32 } from '../core/random.js';
import { BatchCache, type StepTokens } from '../runtime/batch-cache.js';
import type { DecoderLayout } from '../runtime/decoder-layout.js';
import { GATE_BATCH, RANDOM_ROWS, tokenWindows, type GateFeed, type GateFeeds } from './calibration-inputs.js';

/** Tokens of each gate prompt: well inside any position table (GPT-2's tiniest exports hold 64). */
const PROMPT_TOKENS = 16;
/** One-token steps after each prompt, each reading the cache the step before left. */
const DECODE_STEPS = 3;
const SEED = 0xdec0de;

/**
 * A decoder's gate inputs, as the server feeds it (batch-cache.ts): per group of GATE_BATCH
 * sequences (one where the export fixes its batch at one row), a prompt on an empty cache,
 * then DECODE_STEPS one-token steps, each built from the outputs the same model gave at the
 * step before, so the converted model reads its own cache and its errors in it count. Every
 * mask is ones over past + new tokens, position_ids run on from the past, use_cache_branch is
 * true once there is a past. The tokens, from `tokenIds`, are the same for both models.
 */
export function decoderGateFeeds(layout: DecoderLayout, tokenIds: readonly number[]): GateFeeds {
  const next = mulberry32(SEED);
  const rows = layout.singleRow ? 1 : GATE_BATCH;
  const groups = RANDOM_ROWS / GATE_BATCH;
  const feeds: GateFeed[] = [];
  for (let group = 0; group < groups; group++) {
    const windows = tokenWindows(tokenIds, rows, PROMPT_TOKENS + DECODE_STEPS, next);
    const prompts = windows.map((window) => window.slice(0, PROMPT_TOKENS));
    feeds.push(BatchCache.empty(layout, rows).feeds(prompts));
    for (let step = 0; step < DECODE_STEPS; step++) {
      const held = windows.map((window) => window.slice(0, PROMPT_TOKENS + step));
      const fed = windows.map((window) => [window[PROMPT_TOKENS + step] as number]);
      feeds.push((previous) => cacheOf(layout, held, previous).feeds(fed));
    }
  }
  return { source: 'random', feeds, samples: groups * rows };
}

/**
 * The cache a model's last step left, rows holding `held` tokens each: rebuilt as if they had
 * been one prompt, which leaves the same dense cache with no padding.
 */
function cacheOf(
  layout: DecoderLayout,
  held: readonly StepTokens[],
  previous: Parameters<BatchCache['advance']>[0],
): BatchCache {
  const cache = BatchCache.empty(layout, held.length);
  cache.feeds(held);
  cache.advance(previous, held);
  return cache;
}
