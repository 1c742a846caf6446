/**
 * Hands out items in turn, round and round: the request bodies of `--input-pool`, one per
 * request, shared by every slot of a transport so the pool rotates across all of them. A
 * pool of one is today's single payload at the cost of one call per request.
 */
export class Rotation<T> {
  readonly #items: readonly T[];
  #next = 0;

  constructor(items: readonly T[]) {
    if (items.length === 0) throw new Error('a rotation needs at least one item');
    this.#items = items;
  }

  next(): T {
    const item = this.#items[this.#next] as T;
    this.#next = this.#next + 1 === this.#items.length ? 0 : this.#next + 1;
    return item;
  }

  /** Each item mapped once, in the same order: a rotation of what is sent instead of what is made. */
  map<U>(make: (item: T) => U): Rotation<U> {
    return new Rotation(this.#items.map(make));
  }
}
