import { formatCount, formatFigure, formatP } from './report-format.js';
import type { ComparisonSummary, Verdict, VariantSummary } from './report-types.js';

/** The words a dashboard or a script may look for; the fixed-horizon test says them until every arm has its planned n. */
export const PLANNED_N_NOT_REACHED = 'planned n not reached: do not stop early';

export interface VerdictInput {
  test: 'fixed' | 'sequential';
  metric: string;
  higherIsBetter: boolean;
  control: string;
  alphaPerComparison: number;
  plannedN: number | undefined;
  variants: readonly VariantSummary[];
  comparisons: readonly ComparisonSummary[];
}

/**
 * A fixed-horizon p-value means what it says only at the planned sample size: read before it,
 * and read again until it dips under alpha, it finds differences that are not there. So the
 * fixed test calls no winner without a planned n, or before every arm reached it. The mSPRT's
 * p-value holds at any look, so the sequential test may decide as soon as it is below alpha.
 * A version wins when it is significantly better than the control (the best of several that
 * are); the control wins when every other version is significantly worse.
 */
export function decideVerdict(input: VerdictInput): Verdict {
  const { test, comparisons, control, alphaPerComparison } = input;
  const smallest = Math.min(...input.variants.map((variant) => variant.n));
  const progress =
    input.plannedN === undefined ? '' : ` (smallest arm ${formatCount(smallest)} of ${formatCount(input.plannedN)})`;
  if (test === 'fixed' && input.plannedN === undefined) {
    return {
      decision: 'no_planned_n',
      winner: null,
      text:
        'no planned sample size given: run `batchserve experiment plan` and pass --planned-n, ' +
        'or use --test sequential; no winner called',
    };
  }
  if (test === 'fixed' && smallest < (input.plannedN ?? 0)) {
    return { decision: 'planned_n_not_reached', winner: null, text: `${PLANNED_N_NOT_REACHED}${progress}` };
  }
  const pValue = (comparison: ComparisonSummary): number | null =>
    test === 'fixed' ? comparison.fixed_p_value : comparison.sequential_p_value;
  const improves = (difference: number): boolean => (input.higherIsBetter ? difference > 0 : difference < 0);
  const significant = comparisons.filter((comparison) => {
    const p = pValue(comparison);
    return p !== null && p < alphaPerComparison;
  });
  const better = significant.filter((comparison) => improves(comparison.difference));
  const worse = significant.filter((comparison) => !improves(comparison.difference));
  const level = `alpha ${formatFigure(alphaPerComparison)}`;
  const monitoring = test === 'sequential' ? ', valid under continuous monitoring' : '';
  const sequentialProgress = test === 'sequential' ? progress : '';
  const best = better.reduce<ComparisonSummary | undefined>(
    (leader, comparison) => (!leader || improves(comparison.difference - leader.difference) ? comparison : leader),
    undefined,
  );
  if (best) {
    const direction = input.higherIsBetter ? 'higher' : 'lower';
    return {
      decision: 'winner',
      winner: best.version,
      text:
        `version ${best.version} wins: ${input.metric} ${direction} than control ${control} ` +
        `(p = ${formatP(pValue(best))} < ${level})${monitoring}${sequentialProgress}`,
    };
  }
  if (worse.length === comparisons.length) {
    return {
      decision: 'winner',
      winner: control,
      text: `control ${control} wins: every other version has a worse ${input.metric} (at ${level})${monitoring}${sequentialProgress}`,
    };
  }
  const worseNote =
    worse.length === 0 ? '' : `; worse than the control: ${worse.map((c) => `version ${c.version}`).join(', ')}`;
  if (test === 'fixed') {
    const text =
      worse.length === 0
        ? `no significant difference at ${level}`
        : `no version beats control ${control} at ${level}${worseNote}`;
    return { decision: 'no_difference', winner: null, text };
  }
  return {
    decision: 'keep_collecting',
    winner: null,
    text: `no decision yet: keep collecting; this p-value stays valid however often you look${worseNote}${progress}`,
  };
}
