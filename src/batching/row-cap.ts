/**
 * A cap on the rows ahead of a request, its own included, that `max_queue_delay: auto` learns
 * from answered requests (admission-limit.ts from each window's slowest, tail-cap.ts from the
 * p99): none (Infinity) until its subclass sets one. A request with nothing ahead always joins:
 * refusing the earliest it could run helps nobody.
 */
export abstract class RowCap {
  /** The cap; Infinity while there is none. */
  protected capRows = Infinity;
  /** Whether the cap turned a request away since the subclass last judged it (the subclass resets it). */
  protected turnedAway = false;

  /** The most rows a request may have ahead of it with its own; Infinity while there is no cap. */
  get rows(): number {
    return this.capRows;
  }

  /** Whether a request of `rows` with `ahead` rows in front of it may join. */
  admits(ahead: number, rows: number): boolean {
    if (ahead === 0 || ahead + rows <= this.capRows) return true;
    this.turnedAway = true;
    return false;
  }
}
