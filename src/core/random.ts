/**
 * A small seeded generator (mulberry32, public domain, Tommy Ettinger), uniform in [0, 1):
 * the bench's payloads and the accuracy gate's inputs are the same on every run of a seed.
 */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
