/** How a next token is drawn: temperature 0 is greedy (the lowest id among equal best). */
export interface SamplingParams {
  readonly temperature: number;
  readonly topP: number;
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
