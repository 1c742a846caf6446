/**
 * Which model version a point measured. A v2 server keeps statistics per version and lists a
 * model's versions in order, so `model_stats[0]` is version 1's however the traffic is routed:
 * benching a model whose default is version 2 read an idle version's counters, showed average
 * batch 0.00 and fitted nothing (issue #16). The answers say which version served them, and
 * the load generator counts them by version; the statistics read are that version's.
 *
 * Several versions answering one point (a split, a canary) are reported, not merged: the
 * figures are the version's that answered most, since two versions' batches are not one
 * model's cost curve.
 */
import type { DurationStatJson, InferenceStatsJson, ModelStatsJson } from '../metrics/model-statistics.js';
import { describePoint } from './report-table.js';
import type { PointResult } from './report-types.js';

/** One version's statistics before and after a point ran. */
export interface ServedStats {
  readonly version: string;
  readonly before: ModelStatsJson;
  readonly after: ModelStatsJson;
}

/**
 * The entries of the version most answers named. When none named one (a server that does not
 * say, such as Triton over REST, or a point whose every request failed), the version whose
 * successes grew most during the point. `after` holds at least one entry (model-queries.ts).
 */
export function servedStats(
  before: readonly ModelStatsJson[],
  after: readonly ModelStatsJson[],
  answered: Readonly<Record<string, number>> | undefined,
): ServedStats {
  const earlier = new Map(before.map((entry) => [entry.version, entry]));
  const named = mostAnswered(answered ?? {});
  const grown = (entry: ModelStatsJson): number =>
    entry.inference_stats.success.count - (earlier.get(entry.version)?.inference_stats.success.count ?? 0);
  const entry =
    after.find((candidate) => candidate.version === named) ??
    after.reduce((best, candidate) => (grown(candidate) > grown(best) ? candidate : best));
  return { version: entry.version, before: earlier.get(entry.version) ?? unused(entry), after: entry };
}

function mostAnswered(answered: Readonly<Record<string, number>>): string | undefined {
  let most: string | undefined;
  for (const [version, count] of Object.entries(answered)) {
    if (most === undefined || count > (answered[most] ?? 0)) most = version;
  }
  return most;
}

/** A version loaded while the point ran had no counters before it: all it counted is the point's. */
function unused(entry: ModelStatsJson): ModelStatsJson {
  const zero: DurationStatJson = { count: 0, ns: 0 };
  const inferenceStats = Object.fromEntries(Object.keys(entry.inference_stats).map((key) => [key, zero]));
  return {
    ...entry,
    last_inference: 0,
    inference_count: 0,
    execution_count: 0,
    inference_stats: inferenceStats as unknown as InferenceStatsJson,
    batch_stats: [],
  };
}

/** One warning for every point that more than one version answered; undefined when none did. */
export function versionSplitWarning(points: readonly PointResult[]): string | undefined {
  const split = points.filter((point) => Object.keys(point.versions ?? {}).length > 1);
  const [first] = split;
  if (!first) return undefined;
  const answers = Object.entries(first.versions ?? {})
    .map(([version, count]) => `version ${version} ${count}`)
    .join(', ');
  return (
    `several model versions answered ${split.length} point(s) (at ${describePoint(first)}: ${answers} answers); ` +
    `their server-side figures and the fit are the statistics of the version that answered most (serverSide.version)`
  );
}
