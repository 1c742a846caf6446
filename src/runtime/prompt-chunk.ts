import type { StepCost } from './step-cost.js';

/** A prompt step holds a waiting row back at most this many of its own steps. */
const CHUNK_STEPS = 4;
/** Prompt tokens a chunk reads at the least, so a long prompt is not read a few tokens a step. */
const MIN_CHUNK = 32;

/**
 * How many prompt tokens each of `rows` rows reads in one step: what CHUNK_STEPS of the step
 * a waiting row runs hold by the learnt cost, at least MIN_CHUNK, at most `most`
 * (max_tokens_per_step). The waiting row is the slowest other batch's (`othersStepMs`, 0 when
 * none runs) or one that arrives while the prompt is read, whose first step is a one-row step:
 * so a long prompt holds the others back a chunk at a time, on a slow device as on a fast one,
 * and a request arriving meanwhile waits no longer than that for its own first step.
 */
export function promptChunk(cost: StepCost, othersStepMs: number, rows: number, most: number): number {
  const perToken = cost.perToken.value;
  if (perToken <= 0) return most;
  const waitedMs = Math.max(othersStepMs, cost.fixed.value + perToken);
  const fits = Math.floor((CHUNK_STEPS * waitedMs - cost.fixed.value) / (perToken * Math.max(1, rows)));
  return Math.min(most, Math.max(MIN_CHUNK, fits));
}
