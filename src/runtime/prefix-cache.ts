/** Tokens a block holds: prefixes are cached and found a whole block at a time (vLLM's default size). */
export const PREFIX_BLOCK = 16;

/** One row's cache: per layer a key and a value, each [heads, length, head_dim]. */
export interface RowCache {
  readonly length: number;
  readonly tensors: readonly Float32Array[];
}

interface Block {
  /** Unique while cached: a child's key names its parent by it. */
  readonly id: number;
  readonly key: string;
  readonly parent: Block | undefined;
  /** Per layer a key and a value, each [heads, PREFIX_BLOCK, head_dim]. */
  readonly tensors: readonly Float32Array[];
  children: number;
  usedAt: number;
}

/** The blocks of the longest cached prefix a lookup found. */
export interface PrefixHit {
  readonly blocks: readonly Block[];
  readonly tokens: number;
}

/**
 * Automatic prefix caching, as vLLM's: the key/value cache of prompt prefixes already read — a
 * system prompt, a shared document — in blocks of 16 tokens, each keyed by its tokens and the
 * block before it, kept within a byte budget, so a prompt that starts the same way reads only
 * what follows. The least recently used blocks go first, and only blocks no cached block
 * continues, so every cached block stays reachable from the start of a prompt.
 */
export class PrefixCache {
  readonly #blocks = new Map<string, Block>();
  readonly #blockBytes: number;
  #bytes = 0;
  #clock = 0;
  #nextId = 0;

  constructor(
    readonly budgetBytes: number,
    private readonly shape: { readonly heads: number; readonly headDim: number; readonly tensors: number },
  ) {
    this.#blockBytes = shape.tensors * shape.heads * PREFIX_BLOCK * shape.headDim * Float32Array.BYTES_PER_ELEMENT;
  }

  get bytes(): number {
    return this.#bytes;
  }

  /** The longest cached prefix of `ids` that leaves at least one token to read (its logits give the first new token). */
  lookup(ids: readonly number[]): PrefixHit {
    const blocks: Block[] = [];
    const most = Math.floor((ids.length - 1) / PREFIX_BLOCK);
    let parent: Block | undefined;
    for (let index = 0; index < most; index++) {
      const block = this.#blocks.get(keyOf(ids, index, parent));
      if (!block) break;
      block.usedAt = ++this.#clock;
      blocks.push(block);
      parent = block;
    }
    return { blocks, tokens: blocks.length * PREFIX_BLOCK };
  }

  /** A row's cache holding `hit`'s tokens, for a sequence to start from. */
  row(hit: PrefixHit): RowCache {
    const { heads, headDim, tensors: count } = this.shape;
    const length = hit.tokens;
    const span = PREFIX_BLOCK * headDim;
    const tensors = Array.from({ length: count }, () => new Float32Array(heads * length * headDim));
    hit.blocks.forEach((block, index) => {
      for (let tensor = 0; tensor < count; tensor++) {
        const source = block.tensors[tensor] as Float32Array;
        const target = tensors[tensor] as Float32Array;
        for (let h = 0; h < heads; h++) {
          target.set(source.subarray(h * span, (h + 1) * span), (h * length + index * PREFIX_BLOCK) * headDim);
        }
      }
    });
    return { length, tensors };
  }

  /**
   * Keeps the whole blocks of a prompt just read, copied from its row (`slice(from, to)` gives
   * per tensor [heads, to − from, head_dim]); blocks already cached are only marked used.
   */
  insert(ids: readonly number[], slice: (from: number, to: number) => Float32Array[]): void {
    let parent: Block | undefined;
    for (let index = 0; index < Math.floor(ids.length / PREFIX_BLOCK); index++) {
      const key = keyOf(ids, index, parent);
      let block = this.#blocks.get(key);
      if (!block) {
        if (!this.#makeRoom(parent)) return;
        block = {
          id: this.#nextId++,
          key,
          parent,
          tensors: slice(index * PREFIX_BLOCK, (index + 1) * PREFIX_BLOCK),
          children: 0,
          usedAt: 0,
        };
        if (parent) parent.children++;
        this.#blocks.set(key, block);
        this.#bytes += this.#blockBytes;
      }
      block.usedAt = ++this.#clock;
      parent = block;
    }
  }

  /** Evicts least recently used leaves (never `keep`, about to be continued) until a block fits. */
  #makeRoom(keep: Block | undefined): boolean {
    while (this.#bytes + this.#blockBytes > this.budgetBytes) {
      let oldest: Block | undefined;
      for (const block of this.#blocks.values()) {
        if (block.children === 0 && block !== keep && (!oldest || block.usedAt < oldest.usedAt)) oldest = block;
      }
      if (!oldest) return false;
      this.#blocks.delete(oldest.key);
      this.#bytes -= this.#blockBytes;
      if (oldest.parent) oldest.parent.children--;
    }
    return true;
  }
}

/** A block's key: its tokens after its parent's id (ids are never reused, so equal keys mean equal prefixes). */
function keyOf(ids: readonly number[], index: number, parent: Block | undefined): string {
  return `${parent?.id ?? ''}:${ids.slice(index * PREFIX_BLOCK, (index + 1) * PREFIX_BLOCK).join(',')}`;
}
