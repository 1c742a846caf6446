import { LatencyBudgetError } from '../core/errors.js';
import { adaptiveWaitMs, plannedMs } from './adaptive-delay.js';
import { ArrivalRate } from './arrival-rate.js';
import type { BatchCosts } from './batch-costs.js';
import { fullBatchRows, type BatchPolicy, type BudgetQuestion, type Decision, type GroupView } from './batch-policy.js';
import type { BatcherObserver, BatchingPolicy } from './batch-request.js';
import type { CostFit } from './cost-fit.js';
import { expectedCompletion, predictsCost } from './expected-completion.js';
import { ReturningRows } from './returning-rows.js';
import { LEARNED_SHAPES } from './tuning.js';

type AutoConfig = BatchingPolicy & { readonly adaptive: { readonly maxLatencyUs: number } };

/** What `auto` watches of one shape's traffic. */
interface ShapeTraffic {
  arrivals: ArrivalRate;
  readonly returning: ReturningRows;
  /** The wait last chosen, ms: told with each refit. */
  waitMs: number;
  /** The line last told to the observer: it hears of a refit, not of every batch. */
  reported: CostFit | undefined;
}

/**
 * `max_queue_delay: auto`: waits for rows about to arrive only while waiting lowers the
 * instance time per row (adaptive-delay.ts has the rule), from the learnt cost line
 * (batch-costs.ts), the arrival rate of each shape and the rows its last batch owes back (a
 * closed loop's clients returning); and says which requests its latency budget cannot take.
 */
export class AutoPolicy implements BatchPolicy {
  readonly #traffic = new Map<string, ShapeTraffic>();
  /** The shape that last ran: whose line judges a request still reading its body. */
  #lastShape: string | undefined;
  #config: AutoConfig;

  constructor(
    config: AutoConfig,
    private readonly costs: BatchCosts,
    private readonly observer: BatcherObserver,
  ) {
    this.#config = config;
  }

  get config(): AutoConfig {
    return this.#config;
  }

  /** A live reconfigure; a new max_batch_size sizes the arrival windows anew (arrival-rate.ts). */
  set config(config: AutoConfig) {
    if (config.maxBatchSize !== this.#config.maxBatchSize) {
      for (const traffic of this.#traffic.values()) traffic.arrivals = new ArrivalRate(config.maxBatchSize);
    }
    this.#config = config;
  }

  decide(group: GroupView): Decision {
    const { maxBatchSize } = this.config;
    const full = fullBatchRows(this.config, group.rows, group.flushing);
    if (full > 0) return { rows: full, lookAgainAt: Infinity };
    const traffic = this.#of(group.shapeKey);
    const cost = this.costs.of(group.shapeKey);
    traffic.waitMs = adaptiveWaitMs({
      queuedRows: group.rows,
      maxBatchSize,
      freeInstances: group.freeInstances,
      oldestWaitMs: group.now - group.oldestAt,
      gapMs: traffic.arrivals.expectedGapMs(group.now),
      instances: group.instances,
      returningRows: traffic.returning.owedRows(group.now),
      returningInMs: traffic.returning.dueInMs(group.now),
      answeredRows: traffic.returning.answeredRows(group.now),
      answeredInMs: traffic.returning.answeredDueInMs(group.now),
      maxLatencyMs: plannedMs(this.config.adaptive.maxLatencyUs),
      fit: cost.fit.current(),
      pace: cost.pace.value,
    });
    return traffic.waitMs > 0
      ? { rows: 0, lookAgainAt: group.now + traffic.waitMs }
      : { rows: maxBatchSize, lookAgainAt: Infinity };
  }

  arrived(shapeKey: string, now: number, rows: number): void {
    const traffic = this.#of(shapeKey);
    traffic.arrivals.arrived(now, rows);
    traffic.returning.arrived(now, rows);
  }

  /** A batch of `rows` left for an instance, expected to end at `endsAt` (undefined while the line cannot say). */
  dispatched(shapeKey: string, now: number, rows: number, endsAt: number | undefined): void {
    this.#lastShape = shapeKey;
    if (endsAt !== undefined) this.#of(shapeKey).returning.started(now, rows, endsAt);
  }

  /** A batch was answered: its rows are owed back, and the observer hears of a refit. */
  answered(shapeKey: string, now: number, rows: number): void {
    const traffic = this.#of(shapeKey);
    traffic.returning.answered(now, rows);
    const fit = this.costs.of(shapeKey).fit.current();
    if (fit === traffic.reported) return;
    traffic.reported = fit;
    this.observer.fitChanged?.(fit, traffic.waitMs);
  }

  /**
   * Refuses a request (503 BS_ERR_LATENCY_BUDGET) only when it cannot be answered in time: the
   * rows ahead of it, then its own, in batches on the instances as they free, at the learnt
   * T(B) scaled by the pace (expected-completion.ts), counted from its reservation when it had
   * one, would end past `max_latency`. Nothing is refused while the line cannot predict.
   */
  latencyRefusal(question: BudgetQuestion): LatencyBudgetError | undefined {
    const key =
      question.shapeKey !== undefined && this.costs.known(question.shapeKey) ? question.shapeKey : this.#lastShape;
    const cost = key === undefined ? undefined : this.costs.known(key);
    const line = cost?.fit.current();
    if (cost === undefined || line === undefined || !predictsCost(line)) return undefined;
    const maxLatencyMs = this.config.adaptive.maxLatencyUs / 1000;
    const budgetMs = maxLatencyMs - question.spentMs;
    const endMs = expectedCompletion({
      rowsThrough: question.rowsAhead + question.rows,
      maxBatchSize: this.config.maxBatchSize,
      freeInMs: question.freeInMs,
      fit: line,
      pace: cost.pace.value,
      limitMs: budgetMs,
    });
    if (endMs <= budgetMs) return undefined;
    const instances = question.freeInMs.length;
    return new LatencyBudgetError(
      `expected to finish in ${ms(question.spentMs + endMs)} ms, past max_latency ${ms(maxLatencyMs)} ms (${question.rowsAhead} rows queued ahead on ${instances} instance${instances === 1 ? '' : 's'}); try again shortly`,
    );
  }

  #of(shapeKey: string): ShapeTraffic {
    let traffic = this.#traffic.get(shapeKey);
    if (traffic) return traffic;
    traffic = {
      arrivals: new ArrivalRate(this.config.maxBatchSize),
      returning: new ReturningRows(),
      waitMs: 0,
      reported: undefined,
    };
    if (this.#traffic.size >= LEARNED_SHAPES) this.#traffic.delete(this.#traffic.keys().next().value as string);
    this.#traffic.set(shapeKey, traffic);
    return traffic;
  }
}

/** Milliseconds for a message: two significant figures below 100 (0.8, 8.5, 21), whole ones above. */
function ms(value: number): number {
  return value < 100 ? Number(value.toPrecision(2)) : Math.round(value);
}
