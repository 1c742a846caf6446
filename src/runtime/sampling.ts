/** How a next token is drawn: temperature 0 is greedy (the lowest id among equal best). */
export interface SamplingParams {
  readonly temperature: number;
  readonly topP: number;
  /** OpenAI's: subtracted once from the logit of every token the answer holds already. */
  readonly presencePenalty?: number;
  /** OpenAI's: subtracted from a token's logit once for each time the answer holds it. */
  readonly frequencyPenalty?: number;
  /** Token id → added to its logit (−100 bans it, 100 all but forces it). */
  readonly logitBias?: readonly (readonly [number, number])[];
}

/** A token's log probability and the most likely tokens' beside it, as OpenAI's logprobs report them. */
export interface TokenLogprob {
  readonly logprob: number;
  /** The `top` most likely tokens, best first: [id, log probability]. */
  readonly top: readonly (readonly [number, number])[];
}

/**
 * Applies logit_bias and the presence and frequency penalties to one row of logits, in place,
 * before a token is drawn; `counts` are the tokens the answer holds so far.
 */
export function adjustLogits(logits: Float32Array, params: SamplingParams, counts: ReadonlyMap<number, number>): void {
  for (const [id, bias] of params.logitBias ?? []) if (id < logits.length) logits[id] = (logits[id] as number) + bias;
  const presence = params.presencePenalty ?? 0;
  const frequency = params.frequencyPenalty ?? 0;
  if (presence === 0 && frequency === 0) return;
  for (const [id, count] of counts) logits[id] = (logits[id] as number) - presence - frequency * count;
}

/** `chosen`'s log probability under softmax(logits), and the `top` most likely tokens'. */
export function logprobOf(logits: Float32Array, chosen: number, top: number): TokenLogprob {
  let max = -Infinity;
  for (const value of logits) if (value > max) max = value;
  let total = 0;
  for (const value of logits) total += Math.exp(value - max);
  const normalizer = max + Math.log(total);
  const best: [number, number][] = [];
  if (top > 0) {
    for (let id = 0; id < logits.length; id++) {
      const value = logits[id] as number;
      if (best.length === top && value <= (best[top - 1] as [number, number])[1]) continue;
      let at = best.length;
      while (at > 0 && (best[at - 1] as [number, number])[1] < value) at--;
      best.splice(at, 0, [id, value]);
      if (best.length > top) best.pop();
    }
  }
  return {
    logprob: (logits[chosen] as number) - normalizer,
    top: best.map(([id, value]) => [id, value - normalizer] as const),
  };
}

/** The next token from one row of logits; `random` is the sequence's own seeded stream. */
export function pickToken(logits: Float32Array, params: SamplingParams, random: () => number): number {
  if (params.temperature === 0) return argmax(logits);
  let max = -Infinity;
  for (const value of logits) if (value > max) max = value;
  const weights = Array.from(logits, (value, id) => ({ id, weight: Math.exp((value - max) / params.temperature) }));
  const total = weights.reduce((sum, entry) => sum + entry.weight, 0);
  let kept = weights;
  if (params.topP < 1) {
    // The nucleus: the fewest most likely tokens whose probabilities reach top_p.
    weights.sort((a, b) => b.weight - a.weight || a.id - b.id);
    let mass = 0;
    let count = 0;
    while (count < weights.length && mass < params.topP * total)
      mass += (weights[count++] as { weight: number }).weight;
    kept = weights.slice(0, Math.max(count, 1));
  }
  const keptTotal = kept.reduce((sum, entry) => sum + entry.weight, 0);
  let target = random() * keptTotal;
  for (const entry of kept) {
    target -= entry.weight;
    if (target < 0) return entry.id;
  }
  return (kept[kept.length - 1] as { id: number }).id;
}

function argmax(logits: Float32Array): number {
  let best = 0;
  for (let id = 1; id < logits.length; id++) if ((logits[id] as number) > (logits[best] as number)) best = id;
  return best;
}
