/**
 * A FIFO on a growable ring buffer: push and shift are O(1) without Array#shift's copying
 * (the idea of undici's lib/dispatcher/fixed-queue.js, in one buffer).
 */
export class FixedQueue<T> {
  #items: (T | undefined)[];
  #head = 0;
  #count = 0;

  constructor(initialCapacity = 64) {
    this.#items = new Array<T | undefined>(initialCapacity);
  }

  get length(): number {
    return this.#count;
  }

  push(item: T): void {
    if (this.#count === this.#items.length) this.#grow();
    this.#items[(this.#head + this.#count) % this.#items.length] = item;
    this.#count += 1;
  }

  peek(): T | undefined {
    return this.#count === 0 ? undefined : this.#items[this.#head];
  }

  /** The item `offset` places behind the head, without removing it. */
  at(offset: number): T | undefined {
    return offset < this.#count ? this.#items[(this.#head + offset) % this.#items.length] : undefined;
  }

  shift(): T | undefined {
    if (this.#count === 0) return undefined;
    const item = this.#items[this.#head];
    this.#items[this.#head] = undefined;
    this.#head = (this.#head + 1) % this.#items.length;
    this.#count -= 1;
    return item;
  }

  #grow(): void {
    const grown = new Array<T | undefined>(this.#items.length * 2);
    for (let i = 0; i < this.#count; i++) grown[i] = this.#items[(this.#head + i) % this.#items.length];
    this.#items = grown;
    this.#head = 0;
  }
}
