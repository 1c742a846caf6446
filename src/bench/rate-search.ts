/**
 * The highest open-loop rate a server configuration sustains, found by measuring: rates go up
 * fourfold until one fails, down (by half, or to just under what an overloaded probe served)
 * until one holds, then the gap between the highest that held and the lowest that failed (or
 * what an overloaded probe's service allows, if less) is split geometrically until they are
 * within `resolution` of each other.
 */

export interface RateProbe {
  readonly rate: number;
  readonly sustained: boolean;
  /** Requests per second actually served: under overload, about the capacity. */
  readonly throughput: number;
}

export interface RateSearchOptions {
  /** The first rate to try when `known` brackets nothing. */
  readonly startRate: number;
  /** Probes already measured (the sweep's own `--rate` levels): they bracket the search. */
  readonly known?: readonly RateProbe[];
  /** Most probes to run. */
  readonly maxProbes: number;
  /**
   * Stop once the most that could hold (the lowest failed rate, or less when an overloaded
   * probe served less) ÷ the highest sustained rate is at most 1 + this.
   */
  readonly resolution: number;
  /**
   * The share of its rate a sustained probe must serve (plan.ts): a server that served X
   * under overload cannot sustain more than X ÷ this, which narrows the search at once.
   */
  readonly servedShare: number;
}

/** Rates below this are not worth a probe: a replica that cannot do one request a second. */
const SLOWEST_RATE = 1;
/** Up from a rate that held: far enough that a low start reaches capacity in a few probes. */
const GROWTH = 4;
/** After an overloaded probe, the next tries this share of what it served. */
const BELOW_OVERLOAD = 0.9;

/** The probes run, in order; the answer is the highest rate among the sustained ones. */
export async function searchSustainedRate(
  probe: (rate: number) => Promise<RateProbe>,
  options: RateSearchOptions,
): Promise<RateProbe[]> {
  const probes: RateProbe[] = [];
  const bracket = (): Bracket => bracketOf([...(options.known ?? []), ...probes], options.servedShare);
  let rate = roundRate(bracket().next(options.startRate));
  while (probes.length < options.maxProbes && rate >= SLOWEST_RATE && !bracket().narrow(options.resolution)) {
    probes.push(await probe(rate));
    rate = roundRate(bracket().next(rate));
  }
  return probes;
}

/** Three significant digits, which read well in a table and move a rate by 0.5 % at most. */
export function roundRate(rate: number): number {
  return Number(rate.toPrecision(3));
}

/** The highest sustained rate among probes, if any held. */
export function highestSustained(probes: readonly RateProbe[]): RateProbe | undefined {
  return probes.filter((each) => each.sustained).sort((a, b) => b.rate - a.rate)[0];
}

interface Bracket {
  /** Whether the search is done: the highest rate that held is within the resolution of the most that could. */
  narrow(resolution: number): boolean;
  /** The next rate to probe, given the last one. */
  next(last: number): number;
}

function bracketOf(probes: readonly RateProbe[], servedShare: number): Bracket {
  const held = highestSustained(probes)?.rate ?? 0;
  // A failure below a rate that held is noise, and says nothing about the rates between.
  const failures = probes.filter((each) => !each.sustained && each.rate > held);
  const failed = Math.min(...failures.map((each) => each.rate));
  // What failed probes served bounds the capacity; nothing served (every request failed)
  // bounds nothing.
  const served = Math.max(0, ...failures.map((each) => each.throughput));
  const ceiling = served > 0 ? Math.min(failed, served / servedShare) : failed;
  // The ceiling unless noise put it under a rate that held.
  const upper = ceiling > held ? ceiling : failed;
  return {
    narrow: (resolution) => held > 0 && Number.isFinite(upper) && upper / held <= 1 + resolution,
    next(last) {
      if (held === 0 && !Number.isFinite(failed)) return last;
      if (!Number.isFinite(failed)) return held * GROWTH;
      if (held === 0) return Math.min(failed / 2, served > 0 ? BELOW_OVERLOAD * served : Infinity);
      return Math.sqrt(held * upper);
    },
  };
}
