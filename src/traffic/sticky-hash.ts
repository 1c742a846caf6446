/**
 * A key's place in [0, 1): FNV-1a over the key's UTF-16 code units, then murmur3's 32-bit
 * finalizer so that keys differing in one character spread over the whole range. It is part
 * of the product's contract — the same key lands in the same place in every process and
 * release — so experiments can be reproduced; changing it would move users between variants.
 */
export function stickyPoint(key: string): number {
  let hash = 0x811c9dc5;
  for (let index = 0; index < key.length; index++) {
    hash ^= key.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193);
  }
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b);
  hash ^= hash >>> 13;
  hash = Math.imul(hash, 0xc2b2ae35);
  hash ^= hash >>> 16;
  return (hash >>> 0) / 0x1_0000_0000;
}
