import { OnlineCostFit, type CostFit } from './cost-fit.js';
import { batchMsOn, predictsCost } from './expected-completion.js';
import { Pace } from './pace.js';
import { LEARNED_SHAPES } from './tuning.js';

/** What is learnt of one shape of requests' batches. */
export interface ShapeCost {
  /** T(B) = c + m·B, fit on compute time. */
  readonly fit: OnlineCostFit;
  /**
   * How much longer than the line recent batches held their instance, dispatch to answer (the
   * line is fit on compute time alone): what a batch costs the queue now.
   */
  readonly pace: Pace;
}

/**
 * What a batch of each shape of requests costs on this model's instances, learnt from every
 * batch run (and from batches timed at load, `seed`, every shape's prior). The pool asks it
 * when a busy instance will free; `auto` also steers its waits and its latency budget by it.
 * Shapes are kept past their queue groups, which go when empty: a line is learnt over many
 * batches. The least recently used shape goes past LEARNED_SHAPES.
 */
export class BatchCosts {
  readonly #shapes = new Map<string, ShapeCost>();
  readonly #seeds: { rows: number; ms: number }[] = [];
  readonly #seedFit = new OnlineCostFit();

  seed(rows: number, ms: number): void {
    this.#seeds.push({ rows, ms });
    this.#seedFit.seed(rows, ms);
    for (const shape of this.#shapes.values()) shape.fit.seed(rows, ms);
  }

  /** The line the seeded batches alone make: what every shape starts from. */
  get seededFit(): CostFit {
    return this.#seedFit.current();
  }

  /** The shape's costs, made from the seeds on first use. */
  of(shapeKey: string): ShapeCost {
    let shape = this.#shapes.get(shapeKey);
    if (shape) {
      // Most recently used last, so the first key is the one to forget.
      this.#shapes.delete(shapeKey);
    } else {
      shape = { fit: new OnlineCostFit(), pace: new Pace() };
      for (const { rows, ms } of this.#seeds) shape.fit.seed(rows, ms);
      if (this.#shapes.size >= LEARNED_SHAPES) this.#shapes.delete(this.#shapes.keys().next().value as string);
    }
    this.#shapes.set(shapeKey, shape);
    return shape;
  }

  /** A shape already learnt of, without making one. */
  known(shapeKey: string): ShapeCost | undefined {
    return this.#shapes.get(shapeKey);
  }

  /** How long a batch of `rows` is expected to hold its instance, ms, or undefined while the line cannot predict. */
  expectedMs(shapeKey: string, rows: number): number | undefined {
    const shape = this.of(shapeKey);
    const fit = shape.fit.current();
    return predictsCost(fit) ? shape.pace.value * batchMsOn(fit, rows) : undefined;
  }

  /** A batch ran: `costMs` its compute time, `heldMs` how long it held its instance (dispatch to answer). */
  learn(shapeKey: string, rows: number, costMs: number, heldMs: number): void {
    const shape = this.of(shapeKey);
    const line = shape.fit.current();
    if (predictsCost(line)) shape.pace.observe(heldMs, batchMsOn(line, rows));
    shape.fit.add(rows, costMs);
  }
}
