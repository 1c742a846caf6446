const FNV_OFFSET = 0x811c9dc5;
/** Between a version's seed and the key, so "1" + "23" and "12" + "3" hash apart. */
const SEPARATOR = 0x1f;

/** FNV-1a over `text`'s UTF-16 code units, continuing from `hash`. */
function fnv1a(hash: number, text: string): number {
  for (let index = 0; index < text.length; index++) {
    hash ^= text.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash;
}

/** murmur3's 32-bit finalizer: keys differing in one character spread over the whole range. */
function finalize(hash: number): number {
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b);
  hash ^= hash >>> 13;
  hash = Math.imul(hash, 0xc2b2ae35);
  hash ^= hash >>> 16;
  return hash >>> 0;
}

/**
 * A key's place in [0, 1): FNV-1a over the key's UTF-16 code units, then murmur3's 32-bit
 * finalizer. It is part of the product's contract — the same key lands in the same place in
 * every process and release — so experiments can be reproduced.
 */
export function stickyPoint(key: string): number {
  return finalize(fnv1a(FNV_OFFSET, key)) / 0x1_0000_0000;
}

/** The hash state after a version's name, computed once per split so a draw hashes only the key. */
export function versionSeed(version: string): number {
  return Math.imul(fnv1a(FNV_OFFSET, version) ^ SEPARATOR, 0x01000193);
}

/**
 * A key's draw for one version, in (0, 1) and independent across versions: the same hash
 * over the version's seed then the key. Weighted rendezvous hashing picks the version whose
 * `-ln(draw) / weight` is least, which gives each version its weight's share and moves a key
 * only towards a version whose weight rises (or away from one that falls or leaves). Like
 * `stickyPoint`, a contract: changing it would move users between variants.
 */
export function stickyDraw(seed: number, key: string): number {
  return (finalize(fnv1a(seed, key)) + 0.5) / 0x1_0000_0000;
}
